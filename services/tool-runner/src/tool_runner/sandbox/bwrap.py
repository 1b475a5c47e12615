"""The bubblewrap backend: fresh namespaces per command, started as a real non-root uid."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import re
import shutil
from pathlib import Path

from tool_runner.sandbox.base import (
    SKILLS_MOUNT,
    Background,
    ChunkSink,
    ExecOutcome,
    ExecSpec,
    Limits,
    Sandbox,
    SandboxUnavailable,
    drop_privileges,
    limit_args,
    sandbox_env,
    sandbox_workdir,
)
from tool_runner.sandbox.cgroups import CgroupLimiter
from tool_runner.sandbox.hostbins import list_bins
from tool_runner.sandbox.process import (
    discard_process,
    kill_group,
    run_process,
    spawn_process,
    supervise_process,
)
from tool_runner.sandbox.session_net import HOLDER_COMMAND, SessionNets
from tool_runner.sandbox.warm import BOOT, READY, Warm, WarmPool, job_text

log = logging.getLogger(__name__)

# Read-only pieces of the host's /etc a command needs (never shadow, never the service's files).
ETC_FILES = ["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime"]
ROOT_LINKS = ["bin", "lib", "lib32", "lib64", "libx32", "sbin"]
WORKSPACE = "/workspace"
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Seconds a warm sandbox may take to start before it is given up.
WARM_START_TIMEOUT = 30.0


@dataclasses.dataclass(frozen=True)
class WarmKey:
    """What a warm sandbox fixes at its start: the limits and the skill mounts."""

    cpu_seconds: int
    memory_mb: int
    max_processes: int
    max_file_mb: int
    roots: tuple[tuple[str, str], ...]

    def limits(self) -> Limits:
        return Limits(
            cpu_seconds=self.cpu_seconds,
            memory_mb=self.memory_mb,
            max_processes=self.max_processes,
            max_file_mb=self.max_file_mb,
        )


class BwrapSandbox(Sandbox):
    """bwrap with fresh user/pid/net/ipc/uts namespaces; the workspace is the only writable bind."""

    name = "bwrap"

    def __init__(
        self,
        workspace: Path,
        state_dir: Path,
        uid: int | None,
        gid: int | None,
        tmp_size_mb: int = 64,
        chunk: tuple[int, float] = (4096, 0.1),
        skill_roots: dict[str, Path] | None = None,
        warm: int = 0,
        warm_limits: Limits | None = None,
        total_memory_mb: int = 0,
    ):
        super().__init__()
        self.workspace = workspace
        self.configured_roots = dict(skill_roots or {})
        # Host folder of each skill root that is bound (read-only) at /skills/<name>.
        self.root_sources: dict[str, Path] = {}
        self.state_dir = state_dir
        self.uid, self.gid = uid, gid
        self.tmp_size = tmp_size_mb * 1024 * 1024
        self.chunk = chunk
        self.bwrap = shutil.which("bwrap") or ""
        self.prlimit = shutil.which("prlimit") or ""
        self.prefix: list[str] = []
        self.cgroups = CgroupLimiter(total_memory_mb)
        self.warm_limits = warm_limits or Limits()
        self.pool = WarmPool(warm, self._start_warm, self._discard_warm)
        # Off until start() has settled the mounts (its probes would churn the pool).
        self.warm_on = False
        self.nets = SessionNets(self._start_net_holder)

    async def start(self) -> None:
        if not self.bwrap:
            raise SandboxUnavailable(
                "bubblewrap (bwrap) is not installed: install it (apt-get install bubblewrap), "
                "or choose TOOL_RUNNER_SANDBOX=docker, or TOOL_RUNNER_SANDBOX=none to run "
                "commands without isolation"
            )
        if not self.prlimit:
            raise SandboxUnavailable("prlimit (util-linux) is not installed; limits cannot be set")
        self.prefix = drop_privileges(self.uid, self.gid)
        self.root_sources = self.existing_roots(self.configured_roots)
        if not self.cgroups.setup():
            self.warnings.append(
                f"{self.cgroups.problem}: memory and process limits apply per process "
                "(RLIMIT_AS, RLIMIT_NPROC), not to a command as a whole"
            )
            log.warning("bwrap sandbox: %s", self.warnings[-1])
        try:
            await self._probe()
            await self.offer_readable_roots(
                {name: f"{SKILLS_MOUNT}/{name}" for name in self.root_sources}
            )
        except BaseException:
            await self.cgroups.close()
            raise
        self.available_bins = list_bins(
            ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        )
        await self._check_warm()
        log.info("bwrap sandbox ready (%s, uid %s)", self.bwrap, self.uid or os.getuid())

    async def _probe(self, limits: Limits | None = None) -> None:
        """Starts one sandbox; refuses a sandbox whose commands would run as root."""
        limits = dataclasses.replace(limits or Limits(), timeout=20)
        probe = await self.run(ExecSpec(command="id -u", limits=limits))
        said = probe.stdout.text().strip()
        if probe.exit_code != 0:
            raise SandboxUnavailable(
                f"bwrap cannot start a sandbox here (exit {probe.exit_code}): "
                f"{probe.stderr.text().strip() or said}"
            )
        expected = str(self.uid if self.uid is not None else os.getuid())
        if said != expected or said == "0":
            raise SandboxUnavailable(f"sandboxed commands run as uid {said}, not {expected}")

    async def _check_warm(self) -> None:
        """Fills the warm pool and runs the probe through it; a failing warm path is turned off
        (commands then start cold, just as isolated), never the service."""
        if self.pool.size <= 0:
            return
        self.warm_on = True
        self.pool.take(self._warm_key(self.warm_limits))
        self.pool.refill()
        await self.pool.wait_filled()
        try:
            await self._probe(self.warm_limits)
        except SandboxUnavailable as exc:
            self.warm_on = False
            await self.pool.close()
            self.warnings.append(f"warm sandboxes turned off: {exc}")
            log.warning("bwrap sandbox: %s", self.warnings[-1])

    def _etc_files(self) -> dict[str, str]:
        """A passwd/group/hosts of the sandbox's own (fed to bwrap through pipes)."""
        uid = self.uid if self.uid is not None else os.getuid()
        gid = self.gid if self.gid is not None else os.getgid()
        return {
            "passwd": f"root:x:0:0:root:/root:/bin/sh\nsandbox:x:{uid}:{gid}::/tmp:/bin/sh\n",
            "group": f"root:x:0:\nsandbox:x:{gid}:\n",
            "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
        }

    def _etc_pipes(self) -> dict[str, int]:
        """Read ends of pipes holding the generated /etc files (each fits a pipe buffer)."""
        fds = {}
        for name, text in self._etc_files().items():
            read_end, write_end = os.pipe()
            os.write(write_end, text.encode())
            os.close(write_end)
            fds[name] = read_end
        return fds

    def argv(
        self, spec: ExecSpec, etc_fds: dict[str, int], env_fd: int, net_fd: int | None = None
    ) -> list[str]:
        """The whole command line of a cold start: bwrap, prlimit, then `sh -c command`;
        the environment is read from env_fd (env_args_fd); with net_fd, in that network
        namespace (the session's, session_net.py) instead of a new one."""
        enter = self.nets.prefix(net_fd) if net_fd is not None else []
        return [
            *enter,
            *self._bwrap_args(sandbox_workdir(spec.workdir), env_fd, etc_fds, net_fd is None),
            "--",
            self.prlimit,
            *limit_args(spec.limits),
            "--",
            "/bin/sh",
            "-c",
            spec.command,
        ]

    def _bwrap_args(
        self, workdir: str, env_fd: int, etc_fds: dict[str, int], new_net: bool = True
    ) -> list[str]:
        args = [
            *self.prefix,
            self.bwrap,
            "--unshare-user",
            "--unshare-pid",
            *(["--unshare-net"] if new_net else []),
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--hostname",
            "sandbox",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        for link in ROOT_LINKS:
            target = Path("/") / link
            if target.is_symlink():
                args += ["--symlink", os.readlink(target), f"/{link}"]
            elif target.is_dir():
                args += ["--ro-bind", str(target), f"/{link}"]
        for name in ETC_FILES:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        for name, fd in etc_fds.items():
            args += ["--perms", "0444", "--ro-bind-data", str(fd), f"/etc/{name}"]
        args += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            str(self.tmp_size),
            "--tmpfs",
            "/tmp",
            "--bind",
            str(self.workspace),
            "/workspace",
        ]
        for name, mount_point in self.skill_roots.items():
            args += ["--ro-bind", str(self.root_sources[name]), mount_point]
        args += [
            # The root bwrap builds (with /etc etc.) becomes read-only too.
            "--remount-ro",
            "/",
            "--chdir",
            workdir,
            "--clearenv",
            "--args",
            str(env_fd),
        ]
        return args

    async def run(self, spec: ExecSpec, sink: ChunkSink | None = None) -> ExecOutcome:
        """Runs spec in a warm sandbox when one with its limits waits, else starts one."""
        warm = None
        # A session with background processes runs its commands in its network namespace.
        shared = self.nets.has(spec.session_id)
        if self.warm_on and _fits_warm(spec) and not shared:
            warm = self.pool.take(self._warm_key(spec.limits))
        try:
            if warm is not None:
                outcome = await self._run_warm(warm, spec, sink)
                if outcome is not None:
                    return outcome
            return await self._run_cold(spec, sink)
        finally:
            if self.warm_on:
                self.pool.refill()

    def _warm_key(self, limits: Limits) -> WarmKey:
        return WarmKey(
            limits.cpu_seconds,
            limits.memory_mb,
            limits.max_processes,
            limits.max_file_mb,
            tuple(sorted(self.skill_roots.items())),
        )

    async def _start_warm(self, key: WarmKey) -> Warm:
        """Starts a sandbox whose shell waits on stdin for its one job (see sandbox/warm.py)."""
        limits = key.limits()
        group = None
        if self.cgroups.parents:
            group = self.cgroups.create(limits.memory_mb, limits.max_processes)
        fds = self._etc_pipes()
        env_fd = env_args_fd(sandbox_env({}))
        try:
            argv = [
                *self._bwrap_args(WORKSPACE, env_fd, fds),
                "--",
                self.prlimit,
                *limit_args(limits),
                "--",
                "/bin/sh",
                "-c",
                BOOT,
            ]
            if group is not None:
                argv = [*group.shell_prefix(), *argv]
            proc = await spawn_process(
                argv, stdin=asyncio.subprocess.PIPE, pass_fds=(*fds.values(), env_fd), env={}
            )
        except BaseException:
            if group is not None:
                await self.cgroups.remove(group)
            raise
        finally:
            for fd in (*fds.values(), env_fd):
                os.close(fd)

        def release() -> None:
            if group is not None:
                self.cgroups.remove_soon(group)

        warm = Warm(proc, release)
        # Ready once its shell runs: namespaces, mounts and limits are in place by then.
        assert proc.stdout is not None and proc.stderr is not None
        try:
            said = await asyncio.wait_for(proc.stdout.read(len(READY)), WARM_START_TIMEOUT)
            if said == READY:
                return warm
            with contextlib.suppress(TimeoutError):
                said += await asyncio.wait_for(proc.stderr.read(2000), 1)
            raise RuntimeError(said.decode(errors="replace").strip() or "it exited at once")
        except BaseException:
            await self._discard_warm(warm)
            raise

    async def _discard_warm(self, warm: Warm) -> None:
        await discard_process(warm.proc)
        warm.release()

    async def _run_warm(
        self, warm: Warm, spec: ExecSpec, sink: ChunkSink | None
    ) -> ExecOutcome | None:
        """Sends spec to a warm sandbox and supervises it; None if it died before taking it."""
        job = job_text(spec.command, sandbox_workdir(spec.workdir), WORKSPACE, spec.env)
        stdin = warm.proc.stdin
        assert stdin is not None
        try:
            stdin.write(job)
            await asyncio.wait_for(stdin.drain(), spec.limits.timeout)
            stdin.close()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            await self._discard_warm(warm)
            return None
        except BaseException:
            await self._discard_warm(warm)
            raise
        try:
            return await supervise_process(warm.proc, spec.limits, sink, self.chunk)
        finally:
            warm.release()

    async def _run_cold(self, spec: ExecSpec, sink: ChunkSink | None) -> ExecOutcome:
        group = None
        if self.cgroups.parents:
            group = self.cgroups.create(spec.limits.memory_mb, spec.limits.max_processes)
        fds = self._etc_pipes()
        env_fd = env_args_fd(sandbox_env(spec.env))
        net_fd = self.nets.borrow(spec.session_id)
        passed = (*fds.values(), env_fd, *([net_fd] if net_fd is not None else []))
        try:
            argv = self.argv(spec, fds, env_fd, net_fd)
            if group is not None:
                argv = [*group.shell_prefix(), *argv]
            return await run_process(
                argv,
                spec.limits,
                sink,
                self.chunk,
                pass_fds=passed,
                # bwrap's own environment is readable in /proc/1/environ inside the sandbox.
                env={},
            )
        finally:
            for fd in passed:
                os.close(fd)
            if group is not None:
                self.cgroups.remove_soon(group)

    async def start_background(self, spec: ExecSpec) -> Background:
        """A cold start with stdin piped, in its own cgroup and the session's network
        namespace. Killing bwrap takes its pid namespace down; the cgroup catches the rest."""
        net_fd = await self.nets.ensure(spec.session_id)
        group = None
        if self.cgroups.parents:
            group = self.cgroups.create(spec.limits.memory_mb, spec.limits.max_processes)
        fds = self._etc_pipes()
        env_fd = env_args_fd(sandbox_env(spec.env))
        passed = (*fds.values(), env_fd, *([net_fd] if net_fd is not None else []))
        try:
            argv = self.argv(spec, fds, env_fd, net_fd)
            if group is not None:
                argv = [*group.shell_prefix(), *argv]
            proc = await spawn_process(argv, stdin=asyncio.subprocess.PIPE, pass_fds=passed, env={})
        except BaseException:
            if group is not None:
                await self.cgroups.remove(group)
            raise
        finally:
            for fd in passed:
                os.close(fd)

        async def release() -> None:
            if group is not None:
                await self.cgroups.remove(group)

        async def kill() -> None:
            if proc.returncode is None:  # once reaped, its pid may be another process's
                kill_group(proc.pid)

        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        return Background(proc.stdin, proc.stdout, proc.stderr, proc.wait, kill, release)

    async def _start_net_holder(self) -> asyncio.subprocess.Process:
        fds = self._etc_pipes()
        env_fd = env_args_fd(sandbox_env({}))
        try:
            argv = [*self._bwrap_args(WORKSPACE, env_fd, fds), "--", "/bin/sh", "-c"]
            return await spawn_process(
                [*argv, HOLDER_COMMAND],
                stdin=asyncio.subprocess.PIPE,
                pass_fds=(*fds.values(), env_fd),
                env={},
            )
        finally:
            for fd in (*fds.values(), env_fd):
                os.close(fd)

    async def processes_ended(self, session_id: str) -> None:
        self.nets.drop(session_id)

    async def close_session(self, session_id: str) -> None:
        self.nets.drop(session_id)

    async def stop(self) -> None:
        self.nets.close()
        await self.pool.close()
        await self.cgroups.close()


def _fits_warm(spec: ExecSpec) -> bool:
    """A job travels as shell text: a NUL (which no argv can carry either), or a variable name
    that is not a shell name (`export` would read it as code), keeps it cold."""
    if "\0" in spec.command or any("\0" in v for v in spec.env.values()):
        return False
    return all(SHELL_NAME.fullmatch(name) for name in spec.env)


def env_args_fd(env: dict[str, str]) -> int:
    """A file (in memory) holding bwrap's `--setenv NAME VALUE` options, NUL-separated, read with
    `--args FD`: on bwrap's command line, secrets' values would show in any host `ps`."""
    data = b"".join(
        b"--setenv\0%s\0%s\0" % (name.encode(), value.encode("utf-8", "surrogateescape"))
        for name, value in env.items()
    )
    fd = os.memfd_create("bwrap-env", 0)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
