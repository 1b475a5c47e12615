"""Warm sandboxes: bwrap started ahead of time, each waiting for exactly one command.

Starting bubblewrap (user, pid, net, ipc and uts namespaces, mounts, a cgroup, prlimit) costs
10-25 ms, most of a short command's time. A warm sandbox pays it before the command arrives:
its shell blocks reading a job from stdin, then runs it and exits, so every command still gets
namespaces of its own that no other command ever used. Only what a job cannot carry (limits,
mounts) is fixed at start; a sandbox whose start-up options differ from a command's is never
used for it (the key), and a command that finds none ready starts cold, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
from collections.abc import Callable, Coroutine, Hashable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

# The shell a warm sandbox runs: say it is ready (one "." on stdout, read by the pool before
# the sandbox counts as ready, never seen by the command's reader), read the whole job (cat, so
# a long one costs one read per 64 KiB; the trailing "." keeps its trailing newlines), give the
# job /dev/null as its stdin as a cold start would, then run it in this shell, with the
# variable that held it unset first (the job starts with no variables of the boot's, as cold).
BOOT = 'printf .; j=$(cat; echo .) || exit 125; exec </dev/null; eval "unset j\n${j%.}"'
READY = b"."


def job_text(command: str, workdir: str, start_dir: str, env: dict[str, str]) -> bytes:
    """What a warm sandbox is sent: go to the command's folder, set its variables, run it."""
    lines = []
    if workdir != start_dir:
        lines.append(f"cd -- {shlex.quote(workdir)} || exit 126")
    lines += [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
    lines.append(command)
    return "\n".join(lines).encode("utf-8", errors="surrogateescape")


@dataclass
class Warm:
    """One started sandbox waiting for its job, and what must be released after it."""

    proc: asyncio.subprocess.Process
    release: Callable[[], None]

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None


@dataclass
class WarmPool:
    """Keeps up to `size` warm sandboxes for the start-up options commands used last."""

    size: int
    start: Callable[[Any], Coroutine[Any, Any, Warm]]
    discard: Callable[[Warm], Coroutine[Any, Any, None]]
    key: Hashable = None
    ready: list[Warm] = field(default_factory=list)
    _filler: asyncio.Task[Any] | None = None
    _discards: set[asyncio.Task[Any]] = field(default_factory=set)
    _closed: bool = False

    def take(self, key: Hashable) -> Warm | None:
        """A live warm sandbox for key, or None; from now on the pool keeps sandboxes for key.
        The caller calls refill() once its command is done, so that starting the next sandbox
        does not compete with the command for the CPU."""
        if self.size <= 0 or self._closed:
            return None
        if key != self.key:
            self._drop_all()
            self.key = key
        found = None
        while self.ready and found is None:
            candidate = self.ready.pop(0)
            if candidate.alive:
                found = candidate
            else:
                self._spawn_discard(candidate)
        return found

    def refill(self) -> None:
        """Starts sandboxes for the current key until `size` wait (one filler at a time)."""
        if self.size <= 0 or self._closed or self.key is None:
            return
        if self._filler is None or self._filler.done():
            self._filler = asyncio.create_task(self._fill(self.key))

    async def wait_filled(self) -> None:
        """Returns once the current filler is done (start-up and tests)."""
        if self._filler is not None:
            with contextlib.suppress(Exception):
                await self._filler

    async def _fill(self, key: Hashable) -> None:
        while not self._closed and key == self.key and len(self.ready) < self.size:
            try:
                warm = await self.start(key)
            except Exception as exc:  # a cold start still works; say why warm ones do not
                log.warning("warm sandbox could not start: %s", exc)
                return
            if self._closed or key != self.key:
                await self.discard(warm)
                return
            self.ready.append(warm)

    def _drop_all(self) -> None:
        for warm in self.ready:
            self._spawn_discard(warm)
        self.ready.clear()

    def _spawn_discard(self, warm: Warm) -> None:
        task = asyncio.create_task(self.discard(warm))
        self._discards.add(task)
        task.add_done_callback(self._discards.discard)

    async def close(self) -> None:
        """Stops filling and discards every waiting sandbox."""
        self._closed = True
        if self._filler is not None:
            self._filler.cancel()
            with contextlib.suppress(BaseException):
                await self._filler
        waiting, self.ready = self.ready, []
        for warm in waiting:
            await self.discard(warm)
        if self._discards:
            await asyncio.gather(*self._discards, return_exceptions=True)
