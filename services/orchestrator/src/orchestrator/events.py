"""Typed task events: the types that end a task, what a turn reports through, the wire shape.

Events are stored in PostgreSQL (store/events.py), so any replica serves any stream.
"""

from __future__ import annotations

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
