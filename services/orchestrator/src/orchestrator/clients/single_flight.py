"""One fetch at a time: callers that come while it runs share its outcome (at a burst of turns,
one request to a service instead of one per turn)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class _Flight(Generic[T]):
    def __init__(self, fetch: Awaitable[T]):
        self.future: asyncio.Future[T] = asyncio.ensure_future(fetch)
        self.waiters = 0


class SingleFlight(Generic[T]):
    def __init__(self, fetch: Callable[[], Awaitable[T]]):
        self.fetch = fetch
        self._flight: _Flight[T] | None = None

    async def __call__(self) -> T:
        flight = self._flight
        if flight is None or flight.future.done():
            flight = self._flight = _Flight(self.fetch())
            flight.future.add_done_callback(lambda done: self._landed(flight, done))
        flight.waiters += 1
        try:
            # Shielded: a caller that is cancelled does not cancel the others' fetch...
            return await asyncio.shield(flight.future)
        except asyncio.CancelledError:
            # ...but the last one to leave does: a fetch nobody waits for does not outlive
            # them (a pending RPC left on an event loop that goes away wedges grpc.aio).
            if flight.waiters == 1:
                flight.future.cancel()
            raise
        finally:
            flight.waiters -= 1

    def forget(self) -> None:
        """Callers from now on start a fetch of their own (what runs may be out of date)."""
        self._flight = None

    def _landed(self, flight: _Flight[T], done: asyncio.Future[T]) -> None:
        if self._flight is flight:
            self._flight = None
        if not done.cancelled():
            done.exception()  # retrieved: a failure nobody awaits any more is not logged
