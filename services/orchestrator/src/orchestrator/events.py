"""Typed task events with increasing ids, kept per task and in one global stream.

Written here rather than with a pub/sub library (e.g. broadcaster): those keep no history, and
a Last-Event-ID resume needs the recent events kept under consecutive ids.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

TERMINAL_EVENTS = {"task.completed", "task.failed", "task.cancelled"}
# What a turn reports its progress through: sink(event type, data) records one event of its task.
EventSink = Callable[[str, dict[str, Any]], Awaitable[None]]


@dataclass
class Event:
    id: int
    task_id: str
    type: str
    data: dict[str, Any]
    ts: float = field(default_factory=time.time)

    def as_dict(self) -> dict[str, Any]:
        base = {"id": self.id, "task_id": self.task_id, "type": self.type, "ts": self.ts}
        return {**base, **self.data}


class EventLog:
    """An append-only list of events that readers can follow from any id (for Last-Event-ID).

    Ids are consecutive, so a reader finds its place by arithmetic; past `max_events` the
    oldest half is dropped (a reader that far behind resumes at the oldest event kept).
    """

    def __init__(self, max_events: int = 100_000):
        self.max_events = max_events
        self.events: list[Event] = []
        self.next_id = 1
        self.changed = asyncio.Condition()
        self.closed = False

    async def add(self, task_id: str, type_: str, data: dict[str, Any]) -> Event:
        async with self.changed:
            event = Event(self.next_id, task_id, type_, data)
            self.next_id += 1
            self.events.append(event)
            if len(self.events) > self.max_events:
                del self.events[: len(self.events) // 2]
            self.changed.notify_all()
        return event

    def after(self, event_id: int) -> list[Event]:
        """Events with an id greater than event_id."""
        if not self.events:
            return []
        start = max(0, event_id - self.events[0].id + 1)
        return self.events[start:]

    async def close(self) -> None:
        async with self.changed:
            self.closed = True
            self.changed.notify_all()

    async def follow(self, after: int = 0, stop_when_closed: bool = True) -> AsyncIterator[Event]:
        """Yields events with id > after, then waits for more; ends once closed and drained."""
        while True:
            async with self.changed:
                fresh = self.after(after)
                if not fresh:
                    if self.closed and stop_when_closed:
                        return
                    await self.changed.wait()
                    continue
            for event in fresh:
                after = event.id
                yield event
