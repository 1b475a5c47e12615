"""Native chat and task routes: create a turn, read its status, follow or cancel it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header
from sse_starlette import EventSourceResponse, ServerSentEvent

from orchestrator.api.deps import CoreDep
from orchestrator.api.errors import ApiError
from orchestrator.api.schemas import ChatAccepted, ChatRequest, TaskView, Usage
from orchestrator.api.sse import resume_after, sse_event, sse_response
from orchestrator.core import OrchestratorCore
from orchestrator.events import EventLog
from orchestrator.sessions.history import InvalidSessionId
from orchestrator.tasks import Task

router = APIRouter(tags=["tasks"])
SSE_RESPONSES: dict[int | str, dict[str, object]] = {200: {"content": {"text/event-stream": {}}}}


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


def find_task(core: OrchestratorCore, task_id: str) -> Task:
    task = core.tasks.get(task_id)
    if task is None:
        raise ApiError(404, f"no task with id {task_id!r}", "task_not_found")
    return task


@router.post("/api/chat", status_code=202, response_model=ChatAccepted)
async def create_chat(body: ChatRequest, core: CoreDep) -> ChatAccepted:
    """Queues one turn; the answer arrives through the task's status or its event stream."""
    session_id = body.session_id or uuid.uuid4().hex
    try:
        task = await core.submit(session_id, body.message)
    except InvalidSessionId as exc:
        raise ApiError(400, str(exc), "invalid_session_id") from exc
    return ChatAccepted(task_id=task.id, session_id=session_id)


@router.get("/api/tasks/{task_id}", response_model=TaskView)
async def get_task(task_id: str, core: CoreDep) -> TaskView:
    return task_view(find_task(core, task_id))


@router.post("/api/tasks/{task_id}/cancel", response_model=TaskView)
async def cancel_task(task_id: str, core: CoreDep) -> TaskView:
    """Stops a queued or running task; running tools are stopped, history stays valid."""
    task = find_task(core, task_id)
    if task.done:
        raise ApiError(409, f"task is already {task.status}", "task_finished")
    await core.tasks.cancel(task)
    return task_view(task)


async def _stream(log: EventLog, after: int) -> AsyncIterator[ServerSentEvent]:
    async for event in log.follow(after):
        yield sse_event(event.as_dict(), event=event.type, event_id=event.id)


@router.get(
    "/api/tasks/{task_id}/events",
    response_class=EventSourceResponse,
    responses=SSE_RESPONSES,
)
async def task_events(
    task_id: str,
    core: CoreDep,
    last_event_id: Annotated[str | None, Header()] = None,
) -> EventSourceResponse:
    """SSE stream of the task's typed events; reconnect with Last-Event-ID to miss nothing."""
    task = find_task(core, task_id)
    return sse_response(_stream(task.events, resume_after(last_event_id)))


@router.get(
    "/api/events",
    response_class=EventSourceResponse,
    responses=SSE_RESPONSES,
)
async def all_events(
    core: CoreDep,
    last_event_id: Annotated[str | None, Header()] = None,
) -> EventSourceResponse:
    """SSE stream of every task's events (ids are global here)."""
    return sse_response(_stream(core.tasks.global_events, resume_after(last_event_id)))
