"""A loopback-only network namespace per session that has background processes.

Each bwrap command gets a network namespace of its own, so a dev server started in the
background could never be reached by the session's next command. While a session has background
processes, its commands (those and the foreground ones) join one namespace of the session's:
loopback only, as before, but shared, like the docker backend's one container per session.
Other sessions never join it. The namespace is made by a short-lived bwrap (which brings `lo`
up) and held by an open file descriptor of it; commands enter it with nsenter(1) as root,
before privileges are dropped. Not root: no entering; each process keeps its own loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

from tool_runner.sandbox.process import discard_process

log = logging.getLogger(__name__)
READY = b"ready\n"
# The holder's shell: says it runs (namespaces are set up by then), then waits to be killed.
HOLDER_COMMAND = "echo ready; exec cat"
HOLDER_START_TIMEOUT = 30.0


class SessionNets:
    """session id -> an open descriptor of its network namespace."""

    def __init__(self, start_holder: Callable[[], Awaitable[asyncio.subprocess.Process]]):
        self.start_holder = start_holder
        self.nsenter = shutil.which("nsenter") or ""
        self.enabled = os.geteuid() == 0 and bool(self.nsenter)
        self._fds: dict[str, int] = {}
        self._lock = asyncio.Lock()

    def has(self, session_id: str) -> bool:
        return session_id in self._fds

    def borrow(self, session_id: str) -> int | None:
        """A descriptor of the session's namespace of the caller's own (it closes it): the
        session's may be dropped while a command starts."""
        fd = self._fds.get(session_id)
        return os.dup(fd) if fd is not None else None

    async def ensure(self, session_id: str) -> int | None:
        """`borrow`, the namespace made now if the session has none (None when not enabled)."""
        if not self.enabled:
            return None
        async with self._lock:
            if session_id not in self._fds:
                self._fds[session_id] = await self._make()
            return self.borrow(session_id)

    def prefix(self, fd: int) -> list[str]:
        """argv that runs the rest in the namespace behind fd (passed to the child)."""
        return [self.nsenter, f"--net=/proc/self/fd/{fd}", "--"]

    def drop(self, session_id: str) -> None:
        fd = self._fds.pop(session_id, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        for session_id in list(self._fds):
            self.drop(session_id)

    async def _make(self) -> int:
        proc = await self.start_holder()
        try:
            assert proc.stdout is not None
            said = await asyncio.wait_for(proc.stdout.read(len(READY)), HOLDER_START_TIMEOUT)
            if said != READY:
                raise RuntimeError(f"the session's network holder did not start: {said!r}")
            inner = _children(proc.pid)
            if not inner:
                raise RuntimeError("the session's network holder has no child")
            return os.open(f"/proc/{inner[0]}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            await discard_process(proc)


def _children(pid: int) -> list[int]:
    with contextlib.suppress(OSError):
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        return [int(p) for p in text.split()]
    return []
