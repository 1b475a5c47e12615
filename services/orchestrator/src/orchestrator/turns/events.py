"""Typed task events: the types that end a task, what a turn reports through, the wire shape.

Events are stored in PostgreSQL (store/events.py), so any replica serves any stream.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.store.events import WATCH_TTL, StoredEvent
from orchestrator.store.turns import Turn

log = logging.getLogger(__name__)

TERMINAL_EVENTS = {"task.completed", "task.failed", "task.cancelled", "task.interrupted"}
# What a turn reports its progress through: sink(event type, data) records one event of its task.
EventSink = Callable[[str, dict[str, Any]], Awaitable[None]]


def event_body(event: StoredEvent, event_id: int) -> dict[str, Any]:
    """An event as streams send it: `id` is the task's own sequence number in a task's stream
    and the global id in /api/events (each is what Last-Event-ID resumes from)."""
    base = {"id": event_id, "task_id": event.task_id, "type": event.type, "ts": event.ts}
    return {**base, **event.data}


# A running turn's events are numbered and shown to this replica's followers at most this many
# seconds after one another (the first at once), consecutive text deltas merged. They are
# written to the store with the turn's outcome; before it only while some reader follows them
# from the store (a follower on another replica, or of the global stream: `Watches`), in
# batches at most every WRITE_WINDOW, so that reader sees them that much later, and a streamed
# answer is a few writes, not one per token. Unwatched, a batch is written once it holds
# UNWRITTEN_MAX events, which bounds the outcome's statement.
SHOW_WINDOW = 0.05
WRITE_WINDOW = 0.5
UNWRITTEN_MAX = 256
# Writes a batch of one task's numbered events, in order.
WriteEvents = Callable[[list[StoredEvent]], Awaitable[None]]


class LiveLog:
    """The events of a turn running on this replica, numbered in its task's stream (the runner is
    its one writer), kept in memory for followers here while it runs."""

    def __init__(self, task_id: str, last_seq: int, shown: list[StoredEvent] | None = None):
        self.task_id = task_id
        self.events: list[StoredEvent] = list(shown or [])
        self.first_seq = self.events[0].seq if self.events else last_seq + 1
        self.next_seq = last_seq + 1
        self.written_seq = last_seq  # the store has every event up to this one
        self.closed = False
        self._grew = asyncio.Event()

    def has_all_after(self, after_seq: int) -> bool:
        """Whether every event after `after_seq` is (or will be) here."""
        return after_seq >= self.first_seq - 1

    def append(self, type_: str, data: dict[str, Any], ts: float) -> StoredEvent:
        event = StoredEvent(0, self.next_seq, self.task_id, type_, data, ts)
        self.next_seq += 1
        self.events.append(event)
        self._wake()
        return event

    def close(self) -> None:
        """The run is over (its terminal event, if it recorded one, is the last)."""
        self.closed = True
        self._wake()

    async def after(self, after_seq: int) -> AsyncIterator[StoredEvent]:
        """The events after `after_seq`, live, until the run is over."""
        while True:
            grew = self._grew
            start = bisect.bisect_right(self.events, after_seq, key=lambda e: e.seq)
            for event in self.events[start:]:
                after_seq = event.seq
                yield event
            if self.closed and (not self.events or self.events[-1].seq <= after_seq):
                return
            if self.events and self.events[-1].seq > after_seq:
                continue
            await grew.wait()

    def _wake(self) -> None:
        grew, self._grew = self._grew, asyncio.Event()
        grew.set()


class Watches:
    """Which tasks' events some reader follows from the store, on any replica: each reader
    announces its watch (store/events.py, WATCH notifications) when it begins to wait for more
    and again every WATCH_RENEW seconds; a watch lasts `ttl` seconds after its last one."""

    def __init__(self, ttl: float = WATCH_TTL):
        self.ttl = ttl
        self._until: dict[str, float] = {}
        self._all_until = 0.0

    def renew(self, task_id: str | None) -> None:
        """A reader follows `task_id` (None: every turn, the global stream): its watch lasts
        `ttl` seconds from now."""
        until = time.monotonic() + self.ttl
        if task_id is None:
            self._all_until = until
            return
        if len(self._until) >= 1000:  # watches of tasks that never ran here
            now = time.monotonic()
            self._until = {t: u for t, u in self._until.items() if u > now}
        self._until[task_id] = until

    def watched(self, task_id: str) -> bool:
        now = time.monotonic()
        return self._all_until > now or self._until.get(task_id, 0.0) > now

    def forget(self, task_id: str) -> None:
        self._until.pop(task_id, None)


class EventOutbox:
    """One running turn's events on their way to its followers and the store, by one background
    task so the turn never waits for the database. Events are numbered into the turn's LiveLog
    at most SHOW_WINDOW apart (consecutive text deltas of a round merged into one; the first at
    once, so the first words show without delay), and, while `watched` (see WRITE_WINDOW),
    written at most WRITE_WINDOW apart, each write one statement. What is left at the turn's end
    is handed over by `drain`, for the statement that records the outcome. A write that fails is
    raised at the turn's next event, or at `drain`, so a turn whose store is gone still fails."""

    def __init__(
        self,
        log: LiveLog,
        write: WriteEvents,
        show_window: float = SHOW_WINDOW,
        write_window: float = WRITE_WINDOW,
        watched: Callable[[], bool] = lambda: True,
    ):
        self.log = log
        self.write = write
        self.watched = watched  # whether a reader follows the task's events from the store
        self.show_window = show_window
        self.write_window = write_window
        self._pending: list[tuple[str, dict[str, Any], float]] = []
        self._unwritten: list[StoredEvent] = []
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self._draining = False
        self._shown_at = -show_window  # loop times of the last numbering and the last write
        self._written_at = asyncio.get_running_loop().time()

    async def add(self, type_: str, data: dict[str, Any]) -> None:
        if self._error is not None:
            raise self._error
        self._pending.append((type_, data, time.time()))
        if self._writer is None:
            self._writer = asyncio.create_task(self._run(), name="event-outbox")
        self._wake.set()

    async def drain(self) -> list[StoredEvent]:
        """Numbers what is pending, stops the writer once its write in flight is done, and
        returns what the store does not have yet, to be written before the task's terminal
        event; raises a failed write."""
        self._draining = True
        self._wake.set()
        if self._writer is not None:
            await asyncio.shield(self._writer)
        if self._error is not None:
            raise self._error
        self._number()
        unwritten, self._unwritten = self._unwritten, []
        return unwritten

    def wake(self) -> None:
        """Looks again at what to write (a reader began to follow from the store)."""
        self._wake.set()

    def abandon(self) -> None:
        """Stops the writer without writing more (the turn was taken over elsewhere)."""
        if self._writer is not None:
            self._writer.cancel()

    def _number(self) -> None:
        for type_, data, ts in merge_deltas(self._pending):
            self._unwritten.append(self.log.append(type_, data, ts))
        self._pending = []

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._draining:
            self._wake.clear()
            now = loop.time()
            if self._pending and now >= self._shown_at + self.show_window:
                self._number()
                self._shown_at = now
            to_write = self._unwritten and (self.watched() or len(self._unwritten) >= UNWRITTEN_MAX)
            if to_write and now >= self._written_at + self.write_window:
                batch, self._unwritten = self._unwritten, []
                self._written_at = now
                try:
                    await self.write(batch)
                except Exception as exc:  # raised to the turn at its next event
                    log.warning("writing %d events failed: %s", len(batch), exc)
                    self._error = exc
                    return
                self.log.written_seq = batch[-1].seq
                continue
            due = [self._shown_at + self.show_window] if self._pending else []
            if to_write:
                due.append(self._written_at + self.write_window)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(due) - now if due else None):
                    await self._wake.wait()


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


@dataclass
class LiveTurn:
    """A turn running on this replica (its outcome once recorded), its events for
    followers here, and an event set when its run is over."""

    turn: Turn
    log: LiveLog
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    tools_started: int = 0
