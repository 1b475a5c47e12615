"""The bubblewrap backend: fresh namespaces per command, started as a real non-root uid."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from tool_runner.sandbox.base import (
    SKILLS_MOUNT,
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
from tool_runner.sandbox.process import run_process

log = logging.getLogger(__name__)

# Read-only pieces of the host's /etc a command needs (never shadow, never the service's files).
ETC_FILES = ["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime"]
ROOT_LINKS = ["bin", "lib", "lib32", "lib64", "libx32", "sbin"]


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
        self.cgroups = CgroupLimiter()

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
        log.info("bwrap sandbox ready (%s, uid %s)", self.bwrap, self.uid or os.getuid())

    async def _probe(self) -> None:
        """Starts one sandbox; refuses a sandbox whose commands would run as root."""
        probe = await self.run(ExecSpec(command="id -u", limits=Limits(timeout=20)))
        said = probe.stdout.text().strip()
        if probe.exit_code != 0:
            raise SandboxUnavailable(
                f"bwrap cannot start a sandbox here (exit {probe.exit_code}): "
                f"{probe.stderr.text().strip() or said}"
            )
        expected = str(self.uid if self.uid is not None else os.getuid())
        if said != expected or said == "0":
            raise SandboxUnavailable(f"sandboxed commands run as uid {said}, not {expected}")

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

    def argv(self, spec: ExecSpec, etc_fds: dict[str, int]) -> list[str]:
        args = [
            *self.prefix,
            self.bwrap,
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
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
            sandbox_workdir(spec.workdir),
            "--clearenv",
        ]
        for key, value in sandbox_env(spec.env).items():
            args += ["--setenv", key, value]
        args += ["--", self.prlimit, *limit_args(spec.limits), "--", "/bin/sh", "-c", spec.command]
        return args

    async def run(self, spec: ExecSpec, sink: ChunkSink | None = None) -> ExecOutcome:
        group = None
        if self.cgroups.parents:
            group = self.cgroups.create(spec.limits.memory_mb, spec.limits.max_processes)
        fds = self._etc_pipes()
        try:
            argv = self.argv(spec, fds)
            if group is not None:
                argv = [*group.shell_prefix(), *argv]
            return await run_process(
                argv,
                spec.limits,
                sink,
                self.chunk,
                pass_fds=tuple(fds.values()),
                # bwrap's own environment is readable in /proc/1/environ inside the sandbox.
                env={},
            )
        finally:
            for fd in fds.values():
                os.close(fd)
            if group is not None:
                await self.cgroups.remove(group)

    async def stop(self) -> None:
        await self.cgroups.close()
