"""Typed task events: the types that end a task, what a turn reports through, the wire shape.

Events are stored in PostgreSQL (store/events.py), so any replica serves any stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from orchestrator.store.events import StoredEvent

log = logging.getLogger(__name__)

TERMINAL_EVENTS = {"task.completed", "task.failed", "task.cancelled", "task.interrupted"}
# What a turn reports its progress through: sink(event type, data) records one event of its task.
EventSink = Callable[[str, dict[str, Any]], Awaitable[None]]


def event_body(event: StoredEvent, event_id: int) -> dict[str, Any]:
    """An event as streams send it: `id` is the task's own sequence number in a task's stream
    and the global id in /api/events (each is what Last-Event-ID resumes from)."""
    base = {"id": event_id, "task_id": event.task_id, "type": event.type, "ts": event.ts}
    return {**base, **event.data}


# Events are held at most this many seconds after a write, so a streamed answer (or a quick tool
# step) is one write per window, not one per token or event.
WRITE_WINDOW = 0.05
# Writes a batch of one task's events, in order: [(type, data, ts)].
WriteEvents = Callable[[list[tuple[str, dict[str, Any], float]]], Awaitable[None]]


class EventOutbox:
    """One running turn's events on their way to the store, written by one background writer so
    the turn never waits for the database: each write takes every pending event in one
    statement, in order, consecutive text deltas of a round merged into one. The first event
    goes out at once (the first words show without delay), later ones within WRITE_WINDOW of
    the last write wait for it. What is left at the turn's end is handed over by `drain`, for
    the statement that records the outcome. A write that fails is raised at the turn's next
    event, or at `drain`, so a turn whose store is gone still fails."""

    def __init__(self, write: WriteEvents, window: float = WRITE_WINDOW):
        self.write = write
        self.window = window
        self._pending: list[tuple[str, dict[str, Any], float]] = []
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self._draining = False
        self._written_at = -window  # loop time of the last write

    async def add(self, type_: str, data: dict[str, Any]) -> None:
        if self._error is not None:
            raise self._error
        self._pending.append((type_, data, time.time()))
        if self._writer is None:
            self._writer = asyncio.create_task(self._run(), name="event-outbox")
        self._wake.set()

    async def drain(self) -> list[tuple[str, dict[str, Any], float]]:
        """Stops the writer once its write in flight is done and returns what it had not
        written (deltas merged), to be written before the task's terminal event; raises a
        failed write."""
        self._draining = True
        self._wake.set()
        if self._writer is not None:
            await asyncio.shield(self._writer)
        if self._error is not None:
            raise self._error
        pending, self._pending = merge_deltas(self._pending), []
        return pending

    def abandon(self) -> None:
        """Stops the writer without writing more (the turn was taken over elsewhere)."""
        if self._writer is not None:
            self._writer.cancel()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._draining:
            self._wake.clear()
            if not self._pending:
                await self._wake.wait()
                continue
            hold = self._written_at + self.window - loop.time()
            if hold > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(hold):
                        await self._wake.wait()
                continue
            batch, self._pending = merge_deltas(self._pending), []
            self._written_at = loop.time()
            try:
                await self.write(batch)
            except Exception as exc:  # raised to the turn at its next event
                log.warning("writing %d events failed: %s", len(batch), exc)
                self._error = exc
                self._pending.clear()
                return


def merge_deltas(
    events: list[tuple[str, dict[str, Any], float]],
) -> list[tuple[str, dict[str, Any], float]]:
    """Consecutive text deltas of one round as one event (the first one's time)."""
    merged: list[tuple[str, dict[str, Any], float]] = []
    for type_, data, ts in events:
        if merged and type_ == "assistant.delta":
            last_type, last, last_ts = merged[-1]
            if last_type == type_ and last.get("round") == data.get("round"):
                text = str(last.get("text", "")) + str(data.get("text", ""))
                merged[-1] = (type_, {**last, "text": text}, last_ts)
                continue
        merged.append((type_, data, ts))
    return merged
