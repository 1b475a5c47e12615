"""Session routes: list, read history, delete."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import grpc
from fastapi import APIRouter, Depends
from pydantic import BaseModel

from orchestrator.api.deps import get_runtime
from orchestrator.api.errors import ApiError
from orchestrator.runtime import Runtime
from orchestrator.sessions.store import InvalidSessionId

log = logging.getLogger(__name__)
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


async def _existing(runtime: Runtime, session_id: str) -> str:
    try:
        found = await runtime.store.exists(session_id)
    except InvalidSessionId as exc:
        raise ApiError(400, str(exc), "invalid_session_id") from exc
    if not found:
        raise ApiError(404, f"no session with id {session_id!r}", "session_not_found")
    return session_id


@router.get("/api/sessions", response_model=SessionList)
async def list_sessions(runtime: RuntimeDep) -> SessionList:
    """Sessions, most recently updated first."""
    infos = await runtime.store.list()
    return SessionList(sessions=[SessionSummary(**info.__dict__) for info in infos])


@router.get("/api/sessions/{session_id}", response_model=SessionHistory)
async def read_session(session_id: str, runtime: RuntimeDep) -> SessionHistory:
    """The session's history as OpenAI-format messages."""
    await _existing(runtime, session_id)
    return SessionHistory(id=session_id, messages=await runtime.store.load(session_id))


@router.delete("/api/sessions/{session_id}", status_code=204)
async def delete_session(session_id: str, runtime: RuntimeDep) -> None:
    """Closes the session's sandbox (with the docker backend: removes its container), then
    deletes its history. Refused (409) while a turn of the session is queued or running; 503,
    with nothing deleted, when the tool-runner cannot close the sandbox, so a retry can finish."""
    await _existing(runtime, session_id)
    if any(t.session_id == session_id for t in runtime.tasks.active()):
        raise ApiError(409, "the session has a queued or running task", "session_busy")
    async with runtime.tasks.holding(session_id):  # a turn sent meanwhile starts afresh after
        try:
            await runtime.clients.close_session(session_id)
        except grpc.RpcError as exc:
            log.warning("session %s: the tool-runner did not close it: %s", session_id, exc)
            raise ApiError(
                503,
                f"the session was not deleted: the tool-runner could not close its sandbox "
                f"({exc.code().name}); try again",
                "sandbox_unavailable",
            ) from exc
        await runtime.store.delete(session_id)
