"""What every sandbox backend offers: run a command with limits, close a session, describe."""

from __future__ import annotations

import abc
import asyncio
import logging
import posixpath
import shlex
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from crayfish_common.tools import ChunkSink

from tool_runner.sandbox.output import HeadTail

log = logging.getLogger(__name__)
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Skill roots are mounted read-only under this folder (isolating backends).
SKILLS_MOUNT = "/skills"


class SandboxUnavailable(RuntimeError):
    """The configured backend cannot run here; the service must not start."""


@dataclass
class Limits:
    timeout: float = 60.0
    cpu_seconds: int = 300
    memory_mb: int = 1024
    max_processes: int = 256
    max_file_mb: int = 256
    output_limit: int = 40_000
    output_kill_bytes: int = 64 * 1024 * 1024


@dataclass
class ExecSpec:
    command: str
    # Relative to the workspace root ("." for the root itself).
    workdir: str = "."
    env: dict[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    session_id: str = ""


@dataclass
class ExecOutcome:
    exit_code: int
    stdout: HeadTail
    stderr: HeadTail
    duration_ms: float
    timed_out: bool = False
    # Why the sandbox killed the command, if it did ("timeout", "output limit", "cancelled").
    killed: str = ""

    @property
    def truncated(self) -> bool:
        return self.stdout.truncated or self.stderr.truncated


class NoBackground(Exception):
    """This backend cannot keep a command running past its call; the message says why."""


class InputPipe(Protocol):
    """A background process's stdin (asyncio's StreamWriter is one)."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...

    def is_closing(self) -> bool: ...


@dataclass
class Background:
    """A command started to run on, in a cgroup of its own where the host allows one: its
    stdin, stdout and stderr; `wait` gives its exit code once it has ended; `kill` ends its
    whole tree; `release` (after `wait`) frees what it held, killing anything left."""

    stdin: InputPipe
    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader
    wait: Callable[[], Awaitable[int]]
    kill: Callable[[], Awaitable[None]]
    release: Callable[[], Awaitable[None]]


class Sandbox(abc.ABC):
    """A backend; start() raises SandboxUnavailable when it cannot isolate commands."""

    name = "base"
    insecure = False
    # Where commands see the workspace.
    workspace_path = "/workspace"

    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.available_bins: list[str] = []
        # Skill roots commands can read: name -> path commands see it at.
        self.skill_roots: dict[str, str] = {}

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def run(self, spec: ExecSpec, sink: ChunkSink | None = None) -> ExecOutcome: ...

    def existing_roots(self, roots: dict[str, Path]) -> dict[str, Path]:
        """The configured skill roots that are folders; each missing one becomes a warning."""
        found = {}
        for name, folder in sorted(roots.items()):
            if folder.is_dir():
                found[name] = folder.resolve()
            else:
                self.warnings.append(f"skill root {name!r}: {folder} is not a folder; not mounted")
                log.warning("sandbox: %s", self.warnings[-1])
        return found

    async def offer_readable_roots(self, candidates: dict[str, str]) -> None:
        """Offers each candidate skill root (name -> path commands see) that a sandboxed command
        can list, trying one at a time (a root that breaks the sandbox's start is caught too);
        the others become warnings."""
        self.skill_roots = {}
        for name, path in candidates.items():
            self.skill_roots[name] = path
            quoted = shlex.quote(path)
            spec = ExecSpec(command=f"test -r {quoted} && test -x {quoted}")
            spec.limits.timeout = 20
            if (await self.run(spec)).exit_code != 0:
                del self.skill_roots[name]
                self.warnings.append(
                    f"skill root {name!r}: sandboxed commands cannot read it (permissions of "
                    "the folder or its parents); not offered"
                )
                log.warning("sandbox: %s", self.warnings[-1])

    async def start_background(self, spec: ExecSpec) -> Background:
        """Starts spec to run past its call (the process tool follows it)."""
        raise NoBackground(f"background processes are not available with the {self.name} backend")

    async def processes_ended(self, session_id: str) -> None:
        """The session has no background process running any more."""
        return None

    async def close_session(self, session_id: str) -> None:
        """Releases what a session holds; idempotent."""
        return None

    async def stop(self) -> None:
        """Releases everything at shutdown."""
        return None


def limit_args(limits: Limits) -> list[str]:
    """prlimit(1) options: hard = soft, so a command cannot raise them."""
    mib = 1024 * 1024
    return [
        f"--cpu={limits.cpu_seconds}",
        f"--as={limits.memory_mb * mib}",
        f"--nproc={limits.max_processes}",
        f"--fsize={limits.max_file_mb * mib}",
        "--core=0",
        "--nofile=1024",
    ]


def sandbox_env(extra: dict[str, str]) -> dict[str, str]:
    """The whole environment a command sees: nothing of the service's own."""
    env = {
        "PATH": SANDBOX_PATH,
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "USER": "sandbox",
        "TERM": "dumb",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update(extra)
    return env


def sandbox_workdir(workdir: str, root: str = "/workspace") -> str:
    """The absolute working folder inside the sandbox for a workspace-relative one."""
    path = posixpath.normpath(posixpath.join(root, workdir or "."))
    return path if path == root or path.startswith(root + "/") else root


def drop_privileges(uid: int | None, gid: int | None) -> list[str]:
    """An argv prefix that switches root to uid/gid with no groups and no capabilities.

    setpriv(1) rather than create_subprocess_exec(user=...): in CPython 3.11 user/group force
    fork() instead of vfork(), and fork() in the threaded gRPC server crashes children (SIGSEGV
    in gRPC's fork handlers). It costs one exec.
    """
    if uid is None:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise SandboxUnavailable("setpriv (util-linux) is needed to drop root to the sandbox uid")
    return [
        setpriv,
        f"--reuid={uid}",
        f"--regid={gid if gid is not None else uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
    ]
