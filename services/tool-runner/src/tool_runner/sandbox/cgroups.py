"""Per-command cgroups (v1 memory + pids, or v2): a total memory and process cap per command.

RLIMIT_AS bounds each process, not their sum; a cgroup bounds the whole command. Groups are made
under the service's own cgroup (so outer accounting still sees them) and removed after use.
Written against cgroupfs, not systemd-run or a cgroup library: containers have no systemd, and
v1 and v2 both occur on the hosts we run on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
ROOT = Path("/sys/fs/cgroup")
GROUP = "crayfish-tool-runner"


def _own_paths() -> dict[str, str]:
    """controller -> this process's cgroup path ('' key for the v2 unified hierarchy)."""
    paths = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            paths[name] = path
    return paths


@dataclass
class CommandGroup:
    """The cgroup folders of one command (one per hierarchy)."""

    folders: list[Path]

    def shell_prefix(self) -> list[str]:
        """argv that joins these groups, then execs the rest (before privileges are dropped)."""
        joins = " && ".join(f"echo $$ > {f}/cgroup.procs" for f in self.folders)
        return ["/bin/sh", "-c", f'{joins} && exec "$@"', "cgroup-join"]


class CgroupLimiter:
    """Creates a memory+pids cgroup per command where this host lets us; else reports why not."""

    def __init__(self, total_memory_mb: int = 0) -> None:
        # The memory of all commands together, set on the parent (0: no cap of its own).
        self.total_memory_mb = total_memory_mb
        # One parent per service instance: several may share a hierarchy level.
        self.group = f"{GROUP}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.parents: dict[str, Path] = {}
        self.problem = ""
        self._removals: set[asyncio.Task[None]] = set()

    def setup(self) -> bool:
        """True when per-command groups can be made; self.problem says why not otherwise."""
        if os.geteuid() != 0:
            self.problem = "not root: no per-command cgroup"
            return False
        try:
            own = _own_paths()
            if (ROOT / "memory" / "memory.limit_in_bytes").exists() and (ROOT / "pids").is_dir():
                for name in ("memory", "pids"):
                    self.parents[name] = ROOT / name / own[name].lstrip("/") / self.group
            elif "memory" in (ROOT / "cgroup.controllers").read_text().split():
                self.parents[""] = ROOT / own[""].lstrip("/") / self.group
            else:
                self.problem = "no memory cgroup controller"
                return False
            for parent in self.parents.values():
                _remove_stale(parent.parent)
                parent.mkdir(exist_ok=True)
            if "" in self.parents:
                (self.parents[""].parent / "cgroup.subtree_control").write_text("+memory +pids")
                (self.parents[""] / "cgroup.subtree_control").write_text("+memory +pids")
            if self.total_memory_mb:
                self._limit_total(self.total_memory_mb * 1024 * 1024)
        except (OSError, KeyError) as exc:
            self.problem = f"cannot create cgroups: {exc}"
            self.parents.clear()
            return False
        log.debug("cgroups for commands under %s", ", ".join(map(str, self.parents.values())))
        return True

    def _limit_total(self, memory: int) -> None:
        """The parent's memory limit: it bounds the sum of its child groups (v1 hierarchy is
        always on in current kernels; v2 always)."""
        for key, parent in self.parents.items():
            if key == "memory":
                (parent / "memory.limit_in_bytes").write_text(str(memory))
                with contextlib.suppress(OSError):  # only with swap accounting
                    (parent / "memory.memsw.limit_in_bytes").write_text(str(memory))
            elif key == "":
                (parent / "memory.max").write_text(str(memory))
                (parent / "memory.swap.max").write_text("0")

    def create(self, memory_mb: int, max_processes: int) -> CommandGroup:
        name = uuid.uuid4().hex[:16]
        folders = []
        memory = str(memory_mb * 1024 * 1024)
        for key, parent in self.parents.items():
            folder = parent / name
            folder.mkdir()
            folders.append(folder)
            if key == "memory":
                (folder / "memory.limit_in_bytes").write_text(memory)
                with contextlib.suppress(OSError):  # only with swap accounting
                    (folder / "memory.memsw.limit_in_bytes").write_text(memory)
            elif key == "pids":
                (folder / "pids.max").write_text(str(max_processes))
            else:
                (folder / "memory.max").write_text(memory)
                (folder / "memory.swap.max").write_text("0")
                (folder / "pids.max").write_text(str(max_processes))
        return CommandGroup(folders)

    async def remove(self, group: CommandGroup) -> None:
        """Removes the groups once empty. The command is over by now: what is still in a group
        is its namespace being torn down, or a stray that outlived bwrap (killed before its
        --die-with-parent took hold), which is killed."""
        for folder in group.folders:
            for attempt in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if attempt % 10 == 0:
                        _kill_now(folder)
                    await asyncio.sleep(0.02)
            else:
                log.warning("cgroup %s is still busy; left behind", folder)

    def remove_soon(self, group: CommandGroup) -> None:
        """Removes the groups in the background: the kernel tears a finished command's pid
        namespace down for some milliseconds more, and its result need not wait for that."""
        task = asyncio.create_task(self.remove(group))
        self._removals.add(task)
        task.add_done_callback(self._removals.discard)

    async def close(self) -> None:
        """Removes this instance's groups, waiting briefly for killed commands to be reaped."""
        log.debug("removing %s", self.group)
        if self._removals:
            await asyncio.gather(*self._removals, return_exceptions=True)
        for _ in range(100):
            for parent in self.parents.values():
                _remove_tree(parent)
            if not any(p.exists() for p in self.parents.values()):
                return
            await asyncio.sleep(0.02)
        log.warning("cgroups left behind: %s", ", ".join(map(str, self.parents.values())))


def _remove_tree(folder: Path) -> None:
    """Removes an (empty of processes) cgroup folder and its child groups, best effort."""
    with contextlib.suppress(OSError):
        for child in folder.iterdir():
            if child.is_dir():
                _remove_tree(child)
        folder.rmdir()


def _remove_stale(level: Path) -> None:
    """Removes groups left by tool-runner instances that are no longer running, killing what
    still runs in them: a command whose runner was killed as it started (before bwrap's
    --die-with-parent took hold) outlives the runner."""
    with contextlib.suppress(OSError):
        for folder in level.glob(f"{GROUP}-*"):
            pid = folder.name.split("-")[-2]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                _kill_members(folder)
                _remove_tree(folder)


def _kill_members(folder: Path, wait: float = 2.0) -> None:
    """SIGKILLs every process in folder's groups, then waits (briefly) until they are gone."""
    lists = list(folder.rglob("cgroup.procs"))
    deadline = time.monotonic() + wait
    while True:
        pids = {int(p) for f in lists for p in _read(f).split()}
        if not pids or time.monotonic() > deadline:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def _kill_now(folder: Path) -> None:
    """SIGKILLs what is in one group, at once: cgroup.kill where the kernel has it (v2, 5.14),
    else each pid it lists."""
    with contextlib.suppress(OSError):
        (folder / "cgroup.kill").write_text("1")
        return
    for pid in _read(folder / "cgroup.procs").split():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(int(pid), signal.SIGKILL)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
