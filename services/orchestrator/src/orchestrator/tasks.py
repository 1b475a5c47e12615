"""Tasks: one agent turn each, queued per session, with status, result and an event log."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from orchestrator.events import EventLog, EventSink

log = logging.getLogger(__name__)

TaskStatus = Literal["queued", "running", "completed", "failed", "cancelled"]
TurnRunner = Callable[["Task", EventSink], Awaitable[str]]
# Sees every event as it is published (metrics): observer(event type, data).
EventObserver = Callable[[str, dict[str, Any]], None]


@dataclass
class Task:
    id: str
    session_id: str
    message: str
    kind: str = "chat"
    status: TaskStatus = "queued"
    result: str | None = None
    error: str | None = None
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    usage: dict[str, int] = field(
        default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    )
    delivered: bool = True
    events: EventLog = field(default_factory=EventLog)
    runner: asyncio.Task[None] | None = None

    @property
    def done(self) -> bool:
        return self.status in ("completed", "failed", "cancelled")


@dataclass
class SessionQueue:
    """Runs a session's tasks one at a time; `tasks` counts those queued or running."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    tasks: int = 0


class TaskManager:
    """Creates tasks, runs them one at a time per session, keeps the last `keep` of them and the
    last `global_events_kept` events of the global stream (what `/api/events` can resume from)."""

    def __init__(self, run_turn: TurnRunner, keep: int = 1000, global_events_kept: int = 10_000):
        self.run_turn = run_turn
        self.keep = keep
        self.tasks: OrderedDict[str, Task] = OrderedDict()
        # Sessions with queued or running tasks; each entry goes with its last task.
        self.session_queues: dict[str, SessionQueue] = {}
        self.global_events = EventLog(max_events=global_events_kept)
        self.observers: list[EventObserver] = []

    def create(
        self, session_id: str, message: str, kind: str = "chat", task_id: str | None = None
    ) -> Task:
        task_id = task_id or uuid.uuid4().hex
        task = Task(id=task_id, session_id=session_id, message=message, kind=kind)
        self.tasks[task.id] = task
        while len(self.tasks) > self.keep:
            oldest_id, oldest = next(iter(self.tasks.items()))
            if not oldest.done:
                break
            del self.tasks[oldest_id]
        task.runner = asyncio.create_task(self._run(task), name=f"task-{task.id}")
        return task

    @asynccontextmanager
    async def holding(self, session_id: str) -> AsyncIterator[None]:
        """Holds the session's queue as a running task would: its new turns wait until the end."""
        queue = self.session_queues.setdefault(session_id, SessionQueue())
        queue.tasks += 1
        try:
            async with queue.lock:
                yield
        finally:
            queue.tasks -= 1
            if not queue.tasks:
                del self.session_queues[session_id]

    def get(self, task_id: str) -> Task | None:
        return self.tasks.get(task_id)

    def active(self) -> list[Task]:
        return [t for t in self.tasks.values() if not t.done]

    async def cancel(self, task: Task) -> bool:
        if task.done or task.runner is None:
            return False
        task.runner.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task.runner), timeout=10)
        except (asyncio.CancelledError, TimeoutError):
            pass
        return True

    async def shutdown(self) -> None:
        for task in self.active():
            await self.cancel(task)
        await self.global_events.close()

    async def publish(self, task: Task, type_: str, data: dict[str, Any]) -> None:
        """Records an event of the task, in its log and in the global stream."""
        data = {"session_id": task.session_id, **data}
        for observe in self.observers:
            observe(type_, data)
        await task.events.add(task.id, type_, data)
        await self.global_events.add(task.id, type_, data)

    async def _run(self, task: Task) -> None:
        queue = self.session_queues.setdefault(task.session_id, SessionQueue())
        queue.tasks += 1
        try:
            await self.publish(task, "task.queued", {"kind": task.kind})
            async with queue.lock:
                task.status, task.started_at = "running", time.time()
                await self.publish(task, "task.started", {"kind": task.kind})
                task.result = await self.run_turn(task, lambda t, d: self.publish(task, t, d))
            task.status = "completed"
            await self.publish(task, "task.completed", self._summary(task))
        except asyncio.CancelledError:
            task.status, task.error = "cancelled", "cancelled by request"
            await self.publish(task, "task.cancelled", self._summary(task))
        except Exception as exc:  # the task fails; the server goes on
            log.exception("task %s failed", task.id)
            task.status, task.error = "failed", str(exc) or type(exc).__name__
            await self.publish(task, "task.failed", self._summary(task))
        finally:
            queue.tasks -= 1
            if not queue.tasks:  # no other task of the session holds or awaits the lock
                del self.session_queues[task.session_id]
            task.finished_at = time.time()
            await task.events.close()

    def _summary(self, task: Task) -> dict[str, Any]:
        elapsed = (time.time() - task.started_at) if task.started_at else 0.0
        return {
            "kind": task.kind,
            "status": task.status,
            "result": task.result,
            "error": task.error,
            "delivered": task.delivered,
            "usage": dict(task.usage),
            "duration_ms": round(elapsed * 1000, 1),
        }
