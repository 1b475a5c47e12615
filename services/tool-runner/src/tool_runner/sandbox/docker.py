"""The docker backend: one hardened long-lived container per session, created on first use,
reused, and removed on close, when idle and at shutdown; commands run through `docker_exec`."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tool_runner.config import ToolRunnerSettings
from tool_runner.sandbox.base import (
    SANDBOX_PATH,
    SKILLS_MOUNT,
    Background,
    ChunkSink,
    ExecOutcome,
    ExecSpec,
    Sandbox,
    SandboxUnavailable,
    sandbox_env,
    sandbox_workdir,
)
from tool_runner.sandbox.docker_background import start_in_container
from tool_runner.sandbox.docker_exec import DockerExec

log = logging.getLogger(__name__)

# pid 1 of each container: a shell that kill(-1) cannot reach and that reaps orphans.
KEEPER = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"
LIST_BINS = 'IFS=:; for d in $PATH; do ls -1 "$d" 2>/dev/null; done'
_BINS_CACHE: dict[tuple[str, str], list[str]] = {}


@dataclass
class _Session:
    container_id: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    # Background processes running (their containers share this one's network): not idle.
    processes: int = 0


class DockerSandbox(Sandbox):
    """network none, read-only root, caps dropped, no-new-privileges, non-root, pids/mem limits."""

    name = "docker"

    def __init__(
        self, settings: ToolRunnerSettings, workspace: Path, chunk: tuple[int, float] = (4096, 0.1)
    ):
        super().__init__()
        self.settings = settings
        self.workspace = workspace
        self.chunk = chunk
        self.uid = settings.sandbox_uid if settings.is_root else os.getuid()
        self.gid = settings.sandbox_gid if settings.is_root else os.getgid()
        # One owner per tool-runner instance: replicas sharing an engine (compose --scale, or
        # several local runners on one workspace) each keep, sweep and reap their own containers.
        instance = f"{workspace}|{settings.data_dir}|{socket.gethostname()}|{settings.port}"
        self.owner = hashlib.sha256(instance.encode()).hexdigest()[:12]
        self.sessions: dict[str, _Session] = {}
        self.creating = asyncio.Lock()
        self.pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="docker")
        self.client: Any = None
        self.exec: DockerExec | None = None
        self.reaper: asyncio.Task[None] | None = None
        # Host folder (as the engine sees it) of each skill root mounted at /skills/<name>.
        self.root_sources: dict[str, Path] = {}

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, lambda: fn(*args, **kwargs))

    async def start(self) -> None:
        import docker

        host = self.settings.docker_host or os.environ.get("DOCKER_HOST", "")
        try:
            self.client = docker.DockerClient(base_url=host or None, timeout=60)
            await self._call(self.client.ping)
            user = f"{self.uid}:{self.gid}"
            self.exec = DockerExec(self.client.api, self._call, user, self.chunk)
        except Exception as exc:
            raise SandboxUnavailable(
                f"cannot reach a Docker engine at {host or 'default'}: {exc}"
            ) from exc
        try:
            await self._call(self.client.images.get, self.settings.docker_image)
        except docker.errors.ImageNotFound as exc:
            raise SandboxUnavailable(
                f"sandbox image {self.settings.docker_image} not found on the engine; build it "
                "(services/tool-runner/README.md) or set TOOL_RUNNER_DOCKER_IMAGE"
            ) from exc
        await self._remove_labelled({"crayfish.tool-runner": self.owner})
        await self._mount_skill_roots()
        self.available_bins = await self._list_bins()
        self.reaper = asyncio.ensure_future(self._reap_idle())
        log.info("docker sandbox ready (image %s)", self.settings.docker_image)

    async def _mount_skill_roots(self) -> None:
        """Mounts the configured skill roots that exist and that a container's user can list."""
        self.root_sources = self.existing_roots(self.settings.skill_roots)
        if not self.root_sources:
            return
        probe = "; ".join(
            f'test -r {SKILLS_MOUNT}/{name} && test -x {SKILLS_MOUNT}/{name} && echo "{name}"'
            for name in self.root_sources
        )
        try:
            output = await self._call(
                self.client.containers.run,
                self.settings.docker_image,
                ["/bin/sh", "-c", f"{probe}; true"],
                remove=True,
                **self._hardening(),
            )
            readable = set(output.decode(errors="replace").split())
        except Exception as exc:  # the engine refused the mounts (e.g. no such path there)
            log.warning("docker sandbox: skill roots not mountable: %s", exc)
            readable = set()
        for name in list(self.root_sources):
            if name not in readable:
                del self.root_sources[name]
                self.warnings.append(
                    f"skill root {name!r}: containers cannot mount or read it; not offered"
                )
        self.skill_roots = {name: f"{SKILLS_MOUNT}/{name}" for name in self.root_sources}

    async def _list_bins(self) -> list[str]:
        """Executables on the image's PATH (one throwaway container per engine and image)."""
        key = (self.settings.docker_host, self.settings.docker_image)
        if key not in _BINS_CACHE:
            output = await self._call(
                self.client.containers.run,
                self.settings.docker_image,
                ["/bin/sh", "-c", LIST_BINS],
                remove=True,
                **self._hardening(),
            )
            _BINS_CACHE[key] = sorted(set(output.decode(errors="replace").split()))
        return _BINS_CACHE[key]

    def _hardening(self) -> dict[str, Any]:
        from docker.types import Mount, Ulimit

        s = self.settings
        mib = 1024 * 1024
        return {
            "user": f"{self.uid}:{self.gid}",
            "network_mode": "none",
            "read_only": True,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "pids_limit": s.max_processes,
            "mem_limit": f"{s.memory_mb}m",
            "memswap_limit": f"{s.memory_mb}m",
            "ulimits": [
                Ulimit(name="cpu", soft=s.cpu_seconds, hard=s.cpu_seconds),
                Ulimit(name="fsize", soft=s.max_file_mb * mib, hard=s.max_file_mb * mib),
                Ulimit(name="core", soft=0, hard=0),
                Ulimit(name="nofile", soft=1024, hard=1024),
            ],
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={s.tmp_size_mb}m,mode=1777"},
            "mounts": [
                Mount("/workspace", s.docker_workspace_source or str(self.workspace), type="bind"),
                *(
                    Mount(f"{SKILLS_MOUNT}/{name}", str(source), type="bind", read_only=True)
                    for name, source in self.root_sources.items()
                ),
            ],
            "working_dir": "/workspace",
            "environment": {"PATH": SANDBOX_PATH, "HOME": "/tmp"},
            "hostname": "sandbox",
        }

    async def _session(self, session_id: str) -> _Session:
        async with self.creating:
            session = self.sessions.get(session_id)
            if session is not None:
                return session
            digest = hashlib.sha256(session_id.encode()).hexdigest()[:12]
            container = await self._call(
                self.client.containers.run,
                self.settings.docker_image,
                ["/bin/sh", "-c", KEEPER],
                detach=True,
                name=f"crayfish-{self.owner}-{digest}",
                labels={"crayfish.tool-runner": self.owner, "crayfish.session": session_id},
                **self._hardening(),
            )
            session = self.sessions[session_id] = _Session(container.id)
            log.info("session %s: container %s", session_id, container.id[:12])
            return session

    async def run(self, spec: ExecSpec, sink: ChunkSink | None = None) -> ExecOutcome:
        import docker

        assert self.exec is not None, "start() first"
        session_id = spec.session_id or "default"
        for attempt in (1, 2):
            session = await self._session(session_id)
            # Commands of one session run one at a time: each cleans up all it left behind.
            async with session.lock:
                session.last_used = time.monotonic()
                try:
                    return await self.exec.run(session.container_id, spec, sink)
                except docker.errors.APIError as exc:
                    # The container went away (removed, died): start a fresh one, once.
                    if attempt == 2 or not await self._gone(session.container_id):
                        raise
                    log.warning("session %s lost its container (%s); recreating", session_id, exc)
                    self.sessions.pop(session_id, None)
                finally:
                    session.last_used = time.monotonic()
        raise AssertionError("unreachable")

    async def start_background(self, spec: ExecSpec) -> Background:
        """A container of its own in the session container's network (docker_background.py)."""
        session_id = spec.session_id or "default"
        session = await self._session(session_id)
        create = {
            **self._hardening(),
            "image": self.settings.docker_image,
            "command": ["/bin/sh", "-c", spec.command],
            "stdin_open": True,
            "network_mode": f"container:{session.container_id}",
            "working_dir": sandbox_workdir(spec.workdir),
            "environment": sandbox_env(spec.env),
            "labels": {
                "crayfish.tool-runner": self.owner,
                "crayfish.session": session_id,
                "crayfish.process": "1",
            },
        }
        del create["hostname"]  # the network's owner has it
        handle = await start_in_container(self.client, self._call, create)
        session.processes += 1
        released = handle.release

        async def release() -> None:
            session.processes -= 1
            session.last_used = time.monotonic()
            await released()

        handle.release = release
        return handle

    async def _gone(self, cid: str) -> bool:
        import docker

        try:
            container = await self._call(self.client.containers.get, cid)
        except docker.errors.NotFound:
            return True
        if container.status != "running":
            await self._remove(cid)
            return True
        return False

    async def close_session(self, session_id: str) -> None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            await self._remove(session.container_id)

    async def _remove(self, cid: str) -> None:
        with contextlib.suppress(Exception):
            container = await self._call(self.client.containers.get, cid)
            await self._call(container.remove, force=True)

    async def _remove_labelled(self, labels: dict[str, str]) -> None:
        wanted = [f"{k}={v}" for k, v in labels.items()]
        for container in await self._call(
            self.client.containers.list, all=True, filters={"label": wanted}
        ):
            with contextlib.suppress(Exception):
                await self._call(container.remove, force=True)

    async def _reap_idle(self) -> None:
        idle = self.settings.docker_idle_seconds
        while True:
            await asyncio.sleep(max(0.2, min(30.0, idle / 4)))
            now = time.monotonic()
            for sid, session in list(self.sessions.items()):
                busy = session.lock.locked() or session.processes > 0
                if now - session.last_used > idle and not busy:
                    log.info("session %s idle for %.0fs: removing its container", sid, idle)
                    await self.close_session(sid)

    async def stop(self) -> None:
        if self.reaper is not None:
            self.reaper.cancel()
        for sid in list(self.sessions):
            await self.close_session(sid)
        self.pool.shutdown(wait=False, cancel_futures=True)
