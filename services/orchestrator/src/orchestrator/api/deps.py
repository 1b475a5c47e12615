"""FastAPI dependencies: the orchestrator's core, built at start-up."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from orchestrator.core import OrchestratorCore


async def get_core(request: Request) -> OrchestratorCore:
    core: OrchestratorCore = request.app.state.core
    return core


CoreDep = Annotated[OrchestratorCore, Depends(get_core)]
