"""One fetch at a time: callers that come while it runs share its outcome (at a burst of turns,
one request to a service instead of one per turn)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    def __init__(self, fetch: Callable[[], Awaitable[T]]):
        self.fetch = fetch
        self._running: asyncio.Future[T] | None = None

    async def __call__(self) -> T:
        if self._running is None:
            running = asyncio.ensure_future(self.fetch())
            running.add_done_callback(self._done)
            self._running = running
        # Shielded: a caller that is cancelled does not cancel the others' fetch.
        return await asyncio.shield(self._running)

    def forget(self) -> None:
        """Callers from now on start a fetch of their own (what runs may be out of date)."""
        self._running = None

    def _done(self, finished: asyncio.Future[T]) -> None:
        if self._running is finished:
            self._running = None
        if not finished.cancelled():
            finished.exception()  # retrieved: a failure nobody awaits any more is not logged
