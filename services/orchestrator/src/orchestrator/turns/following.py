"""Waiting for a turn's end and following its events, on any replica: from memory while it runs
here, else from the store."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from orchestrator.store import EventStore, StoredEvent, TurnStore
from orchestrator.store.events import POLL_SECONDS, sleep_until
from orchestrator.store.turns import TERMINAL_STATUSES, Turn
from orchestrator.turns.events import TERMINAL_EVENTS, LiveTurn

GLOBAL_RESUME_WINDOW = 10_000  # a new reader of /api/events starts this many events back


class TurnFollowing:
    """TurnManager's waits and follows."""

    store: TurnStore
    events: EventStore
    _live: dict[str, LiveTurn]

    async def wait(self, task_id: str, within: float | None = None) -> Turn:
        """The turn once it has ended (or as it is after `within` seconds). A turn running here
        is awaited in memory; any other, by reading its row when told it ended."""
        live = self._live.get(task_id)
        if live is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(within):
                    await live.ended.wait()
            if live.turn.done:  # its outcome is stored (else it was taken over: read the row)
                return live.turn
        loop = asyncio.get_running_loop()
        deadline = None if within is None else loop.time() + within
        async with self.events.woken_at_end(task_id) as told:
            while True:
                told.clear()  # before reading: an end told during the read is not lost
                turn = await self.store.get(task_id)
                assert turn is not None
                left = POLL_SECONDS if deadline is None else deadline - loop.time()
                if turn.status in TERMINAL_STATUSES or left <= 0:
                    return turn
                await sleep_until(told, left)

    async def follow(self, task_id: str, after_seq: int) -> AsyncIterator[StoredEvent]:
        """The turn's events after `after_seq`, live, up to its terminal event: from memory
        while it runs on this replica, else from the store."""

        def here(seq: int) -> bool:
            live = self._live.get(task_id)
            return live is not None and live.log.has_all_after(seq)

        while True:
            live = self._live.get(task_id)
            if live is not None and live.log.has_all_after(after_seq):
                async for event in live.log.after(after_seq):
                    after_seq = event.seq
                    yield event
                    if event.type in TERMINAL_EVENTS:
                        return
                # Its run here ended without its terminal event (it was taken over): that event
                # is in the store, numbered after what the store had, maybe before what was shown.
                since = min(after_seq, live.log.written_seq)
                async for event in self.events.follow_task(task_id, since, TERMINAL_EVENTS):
                    if event.seq > after_seq or event.type in TERMINAL_EVENTS:
                        yield event
                return
            async for event in self.events.follow_task(
                task_id, after_seq, TERMINAL_EVENTS, until=here
            ):
                after_seq = event.seq
                yield event
                if event.type in TERMINAL_EVENTS:
                    return

    async def follow_all(self, after_id: int | None) -> AsyncIterator[StoredEvent]:
        """Every turn's events after `after_id` (None: the last GLOBAL_RESUME_WINDOW), live."""
        if after_id is None:
            after_id = max(0, await self.events.last_id() - GLOBAL_RESUME_WINDOW)
        async for event in self.events.follow_all(after_id):
            yield event
