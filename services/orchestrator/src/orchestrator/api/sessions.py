"""Session routes: list, read history, choose the model, delete."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from orchestrator.agent.turn_context import content_without_turn_context
from orchestrator.api.deps import CoreDep
from orchestrator.api.errors import ApiError
from orchestrator.api.schemas import ChannelReplyState, RequestBody
from orchestrator.clients import ServiceError
from orchestrator.core import OrchestratorCore, SessionBusy
from orchestrator.store import InvalidSessionId
from orchestrator.store.channels import SessionReply

log = logging.getLogger(__name__)
router = APIRouter(tags=["sessions"])


class SessionSummary(BaseModel):
    id: str
    messages: int
    updated_at: float
    title: str
    # A subagent's own session: the session whose turn spawned it, its label and status.
    parent_session: str | None = None
    label: str | None = None
    status: str | None = None


class SessionList(BaseModel):
    sessions: list[SessionSummary]


class TurnReply(ChannelReplyState):
    """A channel reply of one of the session's turns, placed on the turn."""

    task_id: str
    # The index in `messages` of the user message that started the turn (None: not in the
    # history any more, e.g. compacted away).
    message_index: int | None = None


class SessionHistory(BaseModel):
    id: str
    messages: list[dict[str, Any]]
    model: str | None = None  # the session's model preset; None: the default
    # A chat's session: where each turn's answer went, and whether it got there.
    channel_replies: list[TurnReply] = Field(default_factory=list)


class SessionChange(RequestBody):
    model: str | None = Field(
        description="The model preset for the session's turns (GET /v1/models); null: the default"
    )


class SessionModel(BaseModel):
    id: str
    model: str | None


async def _existing(core: OrchestratorCore, session_id: str) -> str:
    try:
        found = await core.session_exists(session_id)
    except InvalidSessionId as exc:
        raise ApiError(400, str(exc), "invalid_session_id") from exc
    if not found:
        raise ApiError(404, f"no session with id {session_id!r}", "session_not_found")
    return session_id


@router.get("/api/sessions", response_model=SessionList)
async def list_sessions(core: CoreDep) -> SessionList:
    """Sessions, most recently updated first."""
    infos = await core.list_sessions()
    children = await core.session_parents([i.id for i in infos])
    summaries = []
    for info in infos:
        summary = SessionSummary.model_validate(info, from_attributes=True)
        child = children.get(info.id)
        if child is not None:
            summary.parent_session, summary.label = child.parent_session, child.label
            summary.status = child.status
        summaries.append(summary)
    return SessionList(sessions=summaries)


@router.get("/api/sessions/{session_id}", response_model=SessionHistory)
async def read_session(session_id: str, core: CoreDep) -> SessionHistory:
    """The session's history as OpenAI-format messages; user messages as their user wrote
    them (without the turn context Crayfish added for the model)."""
    await _existing(core, session_id)
    messages = [_as_written(m) for m in await core.session_history(session_id)]
    model = await core.session_model(session_id)
    replies = placed(messages, await core.session_channel_replies(session_id))
    return SessionHistory(id=session_id, messages=messages, model=model, channel_replies=replies)


@router.patch("/api/sessions/{session_id}", response_model=SessionModel)
async def change_session(session_id: str, body: SessionChange, core: CoreDep) -> SessionModel:
    """Sets the model preset of the session's next turns (404 `model_not_found` for a name
    that is no preset, `session_not_found` for a session that has no message yet)."""
    await _existing(core, session_id)
    if not await core.set_session_model(session_id, body.model):
        raise ApiError(404, f"no session with id {session_id!r}", "session_not_found")
    return SessionModel(id=session_id, model=body.model)


def _as_written(message: dict[str, Any]) -> dict[str, Any]:
    if message.get("role") == "user":
        return {**message, "content": content_without_turn_context(message.get("content"))}
    return message


def placed(messages: list[dict[str, Any]], replies: list[SessionReply]) -> list[TurnReply]:
    """Each reply on its turn: the next user message, in order, that is its turn's message
    (history keeps no turn ids; a turn's user message is its message as written)."""
    users = [
        (i, _text(m.get("content"))) for i, m in enumerate(messages) if m.get("role") == "user"
    ]
    placed_ones, start = [], 0
    for item in replies:
        index = None
        for position in range(start, len(users)):
            if users[position][1] == item.message.strip():
                index, start = users[position][0], position + 1
                break
        reply = item.reply
        fields = ("task_id", "channel", "chat_id", "status", "error", "created_at", "settled_at")
        state = {name: getattr(reply, name) for name in fields}
        placed_ones.append(TurnReply(**state, message_index=index))
    return placed_ones


def _text(content: Any) -> str:
    if isinstance(content, list):
        parts = [
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        ]
        return "\n".join(parts).strip()
    return str(content or "").strip()


@router.delete("/api/sessions/{session_id}", status_code=204)
async def delete_session(session_id: str, core: CoreDep) -> None:
    """Closes the session's sandbox (with the docker backend: removes its container), then
    deletes its history. Refused (409) while a turn of the session is queued or running; 503,
    with nothing deleted, when the tool-runner cannot close the sandbox, so a retry can finish."""
    await _existing(core, session_id)
    try:
        await core.delete_session(session_id)
    except SessionBusy as exc:
        raise ApiError(409, str(exc), "session_busy") from exc
    except ServiceError as exc:
        log.warning("session %s: the tool-runner did not close it: %s", session_id, exc)
        raise ApiError(
            503,
            f"the session was not deleted: the tool-runner could not close its sandbox "
            f"({exc.status}); try again",
            "sandbox_unavailable",
        ) from exc
