"""Operational routes: heartbeat trigger and Prometheus metrics."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel

from orchestrator.api.deps import get_runtime
from orchestrator.api.schemas import TEXT_ROUTE_ERRORS
from orchestrator.runtime import Runtime

router = APIRouter(tags=["operations"])
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


class HeartbeatView(BaseModel):
    status: str
    task_id: str | None = None
    reason: str = ""


@router.post("/api/heartbeat", response_model=HeartbeatView)
async def heartbeat(runtime: RuntimeDep) -> HeartbeatView:
    """Runs a heartbeat now; skipped without any LLM call when HEARTBEAT.md lists no tasks."""
    task = await runtime.trigger_heartbeat()
    if task is None:
        return HeartbeatView(
            status="skipped", reason="HEARTBEAT.md lists no tasks, or a heartbeat is running"
        )
    return HeartbeatView(status="queued", task_id=task.id)


@router.get("/metrics", response_class=PlainTextResponse, responses=TEXT_ROUTE_ERRORS)
async def metrics(runtime: RuntimeDep) -> PlainTextResponse:
    """Prometheus text format."""
    return PlainTextResponse(
        runtime.metrics.render(len(runtime.tasks.active())),
        media_type="text/plain; version=0.0.4",
    )
