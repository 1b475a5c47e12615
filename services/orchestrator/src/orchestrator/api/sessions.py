"""Session routes: list, read history, delete."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from orchestrator.api.deps import get_runtime
from orchestrator.api.errors import ApiError
from orchestrator.runtime import Runtime
from orchestrator.sessions.store import InvalidSessionId

router = APIRouter(tags=["sessions"])
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


class SessionSummary(BaseModel):
    id: str
    messages: int
    updated_at: float
    title: str


class SessionList(BaseModel):
    sessions: list[SessionSummary]


class SessionHistory(BaseModel):
    id: str
    messages: list[dict[str, Any]]


def _existing(runtime: Runtime, session_id: str) -> str:
    try:
        found = runtime.store.exists(session_id)
    except InvalidSessionId as exc:
        raise ApiError(400, str(exc), "invalid_session_id") from exc
    if not found:
        raise ApiError(404, f"no session with id {session_id!r}", "session_not_found")
    return session_id


@router.get("/api/sessions", response_model=SessionList)
async def list_sessions(runtime: RuntimeDep) -> SessionList:
    """Sessions, most recently updated first."""
    return SessionList(sessions=[SessionSummary(**info.__dict__) for info in runtime.store.list()])


@router.get("/api/sessions/{session_id}", response_model=SessionHistory)
async def read_session(session_id: str, runtime: RuntimeDep) -> SessionHistory:
    """The session's history as OpenAI-format messages."""
    _existing(runtime, session_id)
    return SessionHistory(id=session_id, messages=runtime.store.load(session_id))


@router.delete("/api/sessions/{session_id}", status_code=204)
async def delete_session(session_id: str, runtime: RuntimeDep) -> None:
    """Deletes the history; refused while a turn of this session is queued or running."""
    _existing(runtime, session_id)
    if any(t.session_id == session_id for t in runtime.tasks.active()):
        raise ApiError(409, "the session has a queued or running task", "session_busy")
    runtime.store.delete(session_id)
