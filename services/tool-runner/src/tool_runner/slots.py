"""Bounds on the commands running at once, per session and per tool-runner.

A call past a bound waits for a slot, in arrival order, instead of failing; the wait counts
against the call's own timeout, and a cancelled call leaves the queue. One reply with 40 `exec`
calls runs a few sandboxes at a time, not 40.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator


class NoSlot(Exception):
    """The call's timeout passed while it waited for a slot; the message says why."""


class CommandSlots:
    """`per_session` commands of one session, and `total` of all sessions, at once."""

    def __init__(self, total: int, per_session: int):
        self.total = total
        self.per_session = per_session
        self._all = asyncio.Semaphore(total)
        # Session -> (its semaphore, the calls holding or waiting for it): dropped at zero.
        self._sessions: dict[str, tuple[asyncio.Semaphore, int]] = {}
        self.running = 0

    @contextlib.asynccontextmanager
    async def slot(self, session_id: str, wait_at_most: float) -> AsyncIterator[float]:
        """Holds a slot while the body runs; yields the seconds of `wait_at_most` left after
        the wait. Raises NoSlot when none was free within it."""
        started = time.monotonic()
        session = self._enter(session_id)
        try:
            try:
                async with asyncio.timeout(wait_at_most):
                    await session.acquire()
                    try:
                        await self._all.acquire()
                    except BaseException:
                        session.release()
                        raise
            except TimeoutError:
                raise NoSlot(self._why(wait_at_most)) from None
            self.running += 1
            try:
                yield max(wait_at_most - (time.monotonic() - started), 0.1)
            finally:
                self.running -= 1
                self._all.release()
                session.release()
        finally:
            self._leave(session_id)

    def _enter(self, session_id: str) -> asyncio.Semaphore:
        semaphore, users = self._sessions.get(session_id) or (
            asyncio.Semaphore(self.per_session),
            0,
        )
        self._sessions[session_id] = (semaphore, users + 1)
        return semaphore

    def _leave(self, session_id: str) -> None:
        semaphore, users = self._sessions[session_id]
        if users <= 1:
            del self._sessions[session_id]
        else:
            self._sessions[session_id] = (semaphore, users - 1)

    def _why(self, timeout: float) -> str:
        return (
            f"timed out after {timeout:g}s waiting for a free slot: at most {self.per_session}"
            f" commands of a session and {self.total} in all run at once"
            f" (TOOL_RUNNER_MAX_RUNNING_PER_SESSION, TOOL_RUNNER_MAX_RUNNING); the command did"
            " not start"
        )
