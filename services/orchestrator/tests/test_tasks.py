"""The task manager: one turn at a time per session; bounded memory for a long-running server."""

from __future__ import annotations

import asyncio

from orchestrator.events import EventSink
from orchestrator.tasks import Task, TaskManager


def recording_turn(log: list[str], seconds: float = 0.02):
    async def run_turn(task: Task, emit: EventSink) -> str:
        log.append(f"start {task.message}")
        for word in ("a", "b", "c"):
            await emit("text.delta", {"text": word})
        await asyncio.sleep(seconds)
        log.append(f"end {task.message}")
        return task.message.upper()

    return run_turn


async def test_a_sessions_turns_run_one_at_a_time_and_others_in_parallel():
    log: list[str] = []
    manager = TaskManager(recording_turn(log, 0.05))
    first = manager.create("s1", "one")
    second = manager.create("s1", "two")
    other = manager.create("s2", "other")
    await asyncio.gather(*(t.runner for t in (first, second, other) if t.runner))
    assert log.index("end one") < log.index("start two")  # same session: queued
    assert log.index("start other") < log.index("end one")  # another session: in parallel
    assert [t.result for t in (first, second, other)] == ["ONE", "TWO", "OTHER"]
    assert manager.session_queues == {}  # nothing per session outlives its tasks


async def test_memory_stays_bounded_over_many_turns():
    manager = TaskManager(recording_turn([], 0), keep=50, global_events_kept=300)
    for i in range(400):
        task = manager.create(f"session-{i}", f"turn {i}")
        assert task.runner is not None
        await task.runner
    assert len(manager.tasks) == 50 and manager.get(task.id) is task
    assert len(manager.global_events.events) <= 300
    newest = manager.global_events.events[-1]
    assert newest.task_id == task.id and newest.type == "task.completed"
    assert manager.session_queues == {}
