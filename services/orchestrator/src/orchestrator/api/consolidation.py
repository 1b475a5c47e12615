"""Memory consolidation on demand: POST /api/memory/consolidate."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from orchestrator.api.deps import CoreDep

router = APIRouter(tags=["memory"])


class ConsolidationView(BaseModel):
    status: str  # queued, running, or skipped (nothing new since the last run)
    task_id: str | None = None
    reason: str = ""


@router.post("/api/memory/consolidate", response_model=ConsolidationView)
async def consolidate_memory(core: CoreDep) -> ConsolidationView:
    """Runs memory consolidation now over what happened since the last run (or names the run
    already under way); skipped without any LLM call when nothing new happened."""
    turn = await core.consolidate_memory()
    if turn is None:
        return ConsolidationView(
            status="skipped", reason="nothing new happened since the last consolidation"
        )
    return ConsolidationView(status=turn.status, task_id=turn.id)
