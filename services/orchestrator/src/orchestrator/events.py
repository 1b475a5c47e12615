"""Typed task events: the types that end a task, what a turn reports through, the wire shape.

Events are stored in PostgreSQL (store/events.py), so any replica serves any stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from orchestrator.store.events import StoredEvent

TERMINAL_EVENTS = {"task.completed", "task.failed", "task.cancelled", "task.interrupted"}
# What a turn reports its progress through: sink(event type, data) records one event of its task.
EventSink = Callable[[str, dict[str, Any]], Awaitable[None]]


def event_body(event: StoredEvent, event_id: int) -> dict[str, Any]:
    """An event as streams send it: `id` is the task's own sequence number in a task's stream
    and the global id in /api/events (each is what Last-Event-ID resumes from)."""
    base = {"id": event_id, "task_id": event.task_id, "type": event.type, "ts": event.ts}
    return {**base, **event.data}


# Text deltas arriving within this many seconds are stored as one event: a streamed answer
# comes in dozens of small pieces, and each stored event is a round trip to the database.
DELTA_WINDOW = 0.05
Append = Callable[[str, dict[str, Any]], Awaitable[None]]


class DeltaCoalescer:
    """One task's events on their way to the store: a text delta goes at once if none went in
    the last DELTA_WINDOW seconds (the first words show without delay), later ones of the same
    round are merged until the window ends; any other event first sends the deltas before it,
    so order holds."""

    def __init__(self, append: Append, window: float = DELTA_WINDOW):
        self.append = append
        self.window = window
        self._lock = asyncio.Lock()
        self._pending: list[dict[str, Any]] = []
        self._timer: asyncio.Task[None] | None = None
        self._sent_at = -window  # when a delta was last sent (loop time)

    async def add(self, type_: str, data: dict[str, Any]) -> None:
        async with self._lock:
            if type_ != "assistant.delta":
                await self._flush()
                await self.append(type_, data)
                return
            if self._pending and self._pending[-1].get("round") != data.get("round"):
                await self._flush()
            self._pending.append(data)
            wait = self._sent_at + self.window - asyncio.get_running_loop().time()
            if wait <= 0:
                await self._flush()
            elif self._timer is None:
                self._timer = asyncio.create_task(self._flush_soon(wait))

    async def close(self) -> None:
        """Sends what is pending (before the task's terminal event)."""
        async with self._lock:
            await self._flush()

    async def _flush_soon(self, wait: float) -> None:
        await asyncio.sleep(wait)
        async with self._lock:
            self._timer = None
            await self._flush()

    async def _flush(self) -> None:
        if self._timer is not None and self._timer is not asyncio.current_task():
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        merged = {
            **self._pending[0],
            "text": "".join(str(d.get("text", "")) for d in self._pending),
        }
        self._pending = []
        self._sent_at = asyncio.get_running_loop().time()
        await self.append("assistant.delta", merged)
