"""Native chat and turn routes: create a turn, read its status, follow or cancel it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from orchestrator.api.deps import CoreDep
from orchestrator.api.errors import ApiError
from orchestrator.api.retries import earlier_task, submit_once, turn_request
from orchestrator.api.schemas import (
    ChannelReplyState,
    ChatAccepted,
    ChatRequest,
    SubagentView,
    TaskView,
    Usage,
)
from orchestrator.api.sse import resume_after, sse_event, sse_response
from orchestrator.content.media import ImageRejected
from orchestrator.core import OrchestratorCore
from orchestrator.store import InvalidSessionId, StoredEvent
from orchestrator.store.channels import ChannelReply
from orchestrator.store.sessions import check_session_id
from orchestrator.store.turns import Turn
from orchestrator.turns.events import event_body

router = APIRouter(tags=["tasks"])
SSE_RESPONSES: dict[int | str, dict[str, object]] = {200: {"content": {"text/event-stream": {}}}}


def task_view(turn: Turn) -> TaskView:
    return TaskView(
        task_id=turn.id,
        session_id=turn.session_id,
        kind=turn.kind,
        status=turn.status,
        result=turn.result,
        error=turn.error,
        delivered=turn.delivered,
        created_at=turn.created_at,
        started_at=turn.started_at,
        finished_at=turn.finished_at,
        usage=Usage(**turn.usage),
    )


def reply_state(reply: ChannelReply | None) -> ChannelReplyState | None:
    if reply is None:
        return None
    fields = ("channel", "chat_id", "status", "error", "created_at", "settled_at")
    return ChannelReplyState(**{name: getattr(reply, name) for name in fields})


async def find_task(core: OrchestratorCore, task_id: str) -> Turn:
    turn = await core.get_task(task_id)
    if turn is None:
        raise ApiError(404, f"no task with id {task_id!r}", "task_not_found")
    return turn


@router.post("/api/chat", status_code=202, response_model=ChatAccepted)
async def create_chat(body: ChatRequest, core: CoreDep, request: Request) -> ChatAccepted:
    """Queues one turn; the answer arrives through the turn's status or its event stream. With
    an Idempotency-Key, the same request again returns the same turn (api/retries.py)."""
    keyed = "idempotency-key" in request.headers
    once = await turn_request(request, core, "/api/chat") if keyed else None
    if once is not None and (earlier := await earlier_task(core, once)) is not None:
        return ChatAccepted(task_id=earlier.id, session_id=earlier.session_id)
    session_id = body.session_id or uuid.uuid4().hex
    if body.model:
        core.model_named(body.model)  # 404 model_not_found before any image is stored
    try:
        check_session_id(session_id)
        core.check_request_images(len(body.images))
        images = await core.take_images(body.images)
        model = body.model or ""
        if once is None:
            turn = await core.submit(session_id, body.message, images=images, model=model)
        else:
            turn, _ = await submit_once(core, once, session_id, body.message, images, model)
    except InvalidSessionId as exc:
        raise ApiError(400, str(exc), "invalid_session_id") from exc
    except ImageRejected as exc:
        raise ApiError(exc.status, exc.message, exc.code) from exc
    return ChatAccepted(task_id=turn.id, session_id=turn.session_id)


@router.get("/api/tasks", response_model=list[SubagentView])
async def list_subagents(
    parent: Annotated[str, Query(min_length=1, max_length=200)], core: CoreDep
) -> list[SubagentView]:
    """The subagents a task spawned (`?parent=<task id>`), oldest first; none: []."""
    return [
        SubagentView(
            **task_view(child.turn).model_dump(),
            parent_id=child.parent_id,
            parent_session=child.parent_session,
            label=child.label,
            depth=child.depth,
        )
        for child in await core.subagents_of(parent)
        if child.turn is not None
    ]


@router.get("/api/tasks/{task_id}", response_model=TaskView)
async def get_task(task_id: str, core: CoreDep) -> TaskView:
    """The turn as it is now; a channel turn's with where its answer went (`channel_reply`)."""
    view = task_view(await find_task(core, task_id))
    if view.status == "running" and await core.awaiting_approval([task_id]):
        view.status = "awaiting_approval"
    view.channel_reply = reply_state((await core.channel_replies_of([task_id])).get(task_id))
    return view


@router.post("/api/tasks/{task_id}/cancel", response_model=TaskView)
async def cancel_task(task_id: str, core: CoreDep) -> TaskView:
    """Stops a queued or running turn, on whichever replica runs it; running tools are
    stopped, history stays valid."""
    turn = await find_task(core, task_id)
    if turn.done:
        raise ApiError(409, f"task is already {turn.status}", "task_finished")
    return task_view(await core.cancel_task(turn))


async def _stream(
    events: AsyncIterator[StoredEvent], global_ids: bool
) -> AsyncIterator[ServerSentEvent]:
    async for event in events:
        event_id = event.id if global_ids else event.seq
        yield sse_event(event_body(event, event_id), event=event.type, event_id=event_id)


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
    """SSE stream of the turn's typed events; reconnect with Last-Event-ID to miss nothing."""
    turn = await find_task(core, task_id)
    return sse_response(_stream(core.follow_task(turn.id, resume_after(last_event_id)), False))


@router.get(
    "/api/events",
    response_class=EventSourceResponse,
    responses=SSE_RESPONSES,
)
async def all_events(
    core: CoreDep,
    last_event_id: Annotated[str | None, Header()] = None,
) -> EventSourceResponse:
    """SSE stream of every turn's events (ids are global here); without Last-Event-ID it
    begins with the last 10,000 events."""
    after = resume_after(last_event_id) if last_event_id else None
    return sse_response(_stream(core.follow_all_tasks(after), True))
