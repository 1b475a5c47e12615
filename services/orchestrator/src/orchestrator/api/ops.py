"""Operational routes: heartbeat trigger and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response
from pydantic import BaseModel

from orchestrator.api.deps import CoreDep
from orchestrator.api.schemas import TEXT_ROUTE_ERRORS
from orchestrator.metrics import CONTENT_TYPE

router = APIRouter(tags=["operations"])


class HeartbeatView(BaseModel):
    status: str
    task_id: str | None = None
    reason: str = ""


@router.post("/api/heartbeat", response_model=HeartbeatView)
async def heartbeat(core: CoreDep) -> HeartbeatView:
    """Runs a heartbeat now; skipped without any LLM call when HEARTBEAT.md lists no tasks."""
    task = await core.trigger_heartbeat()
    if task is None:
        return HeartbeatView(
            status="skipped", reason="HEARTBEAT.md lists no tasks, or a heartbeat is running"
        )
    return HeartbeatView(status="queued", task_id=task.id)


@router.get("/metrics", response_class=PlainTextResponse, responses=TEXT_ROUTE_ERRORS)
async def metrics(core: CoreDep) -> Response:
    """Prometheus text format."""
    return Response(await core.render_metrics(), media_type=CONTENT_TYPE)
