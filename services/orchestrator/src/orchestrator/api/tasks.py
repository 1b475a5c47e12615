"""Native chat and task routes: create a turn, read its status, follow or cancel it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Header
from fastapi.responses import StreamingResponse

from orchestrator.api.deps import get_runtime
from orchestrator.api.errors import ApiError
from orchestrator.api.schemas import ChatAccepted, ChatRequest, TaskView, Usage
from orchestrator.api.sse import sse_message, sse_response
from orchestrator.events import EventLog
from orchestrator.runtime import Runtime
from orchestrator.sessions.store import InvalidSessionId
from orchestrator.tasks import Task

router = APIRouter(tags=["tasks"])
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def task_view(task: Task) -> TaskView:
    return TaskView(
        task_id=task.id,
        session_id=task.session_id,
        kind=task.kind,
        status=task.status,
        result=task.result,
        error=task.error,
        delivered=task.delivered,
        created_at=task.created_at,
        started_at=task.started_at,
        finished_at=task.finished_at,
        usage=Usage(**task.usage),
    )


def find_task(runtime: Runtime, task_id: str) -> Task:
    task = runtime.tasks.get(task_id)
    if task is None:
        raise ApiError(404, f"no task with id {task_id!r}", "task_not_found")
    return task


@router.post("/api/chat", status_code=202, response_model=ChatAccepted)
async def create_chat(body: ChatRequest, runtime: RuntimeDep) -> ChatAccepted:
    """Queues one turn; the answer arrives through the task's status or its event stream."""
    session_id = body.session_id or uuid.uuid4().hex
    try:
        task = await runtime.submit(session_id, body.message)
    except InvalidSessionId as exc:
        raise ApiError(400, str(exc), "invalid_session_id") from exc
    return ChatAccepted(task_id=task.id, session_id=session_id)


@router.get("/api/tasks/{task_id}", response_model=TaskView)
async def get_task(task_id: str, runtime: RuntimeDep) -> TaskView:
    return task_view(find_task(runtime, task_id))


@router.post("/api/tasks/{task_id}/cancel", response_model=TaskView)
async def cancel_task(task_id: str, runtime: RuntimeDep) -> TaskView:
    """Stops a queued or running task; running tools are stopped, history stays valid."""
    task = find_task(runtime, task_id)
    if task.done:
        raise ApiError(409, f"task is already {task.status}", "task_finished")
    await runtime.tasks.cancel(task)
    return task_view(task)


def _last_event_id(value: str | None) -> int:
    return int(value) if value and value.strip().isdigit() else 0


async def _stream(log: EventLog, after: int) -> AsyncIterator[str]:
    async for event in log.follow(after):
        yield sse_message(event.as_dict(), event=event.type, event_id=event.id)


@router.get(
    "/api/tasks/{task_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def task_events(
    task_id: str,
    runtime: RuntimeDep,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """SSE stream of the task's typed events; reconnect with Last-Event-ID to miss nothing."""
    task = find_task(runtime, task_id)
    return sse_response(_stream(task.events, _last_event_id(last_event_id)))


@router.get(
    "/api/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def all_events(
    runtime: RuntimeDep,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """SSE stream of every task's events (ids are global here)."""
    return sse_response(_stream(runtime.tasks.global_events, _last_event_id(last_event_id)))
