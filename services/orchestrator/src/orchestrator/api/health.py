"""Liveness and readiness: /healthz answers while the process lives, /readyz checks dependencies."""

from __future__ import annotations

from typing import Annotated

import grpc
from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from orchestrator.api.deps import get_runtime
from orchestrator.api.schemas import DependencyView, HealthView, ReadyView
from orchestrator.runtime import Runtime

router = APIRouter(tags=["health"])
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


@router.get("/healthz", response_model=HealthView)
async def healthz() -> HealthView:
    return HealthView()


@router.get("/readyz", response_model=ReadyView, responses={503: {"model": ReadyView}})
async def readyz(runtime: RuntimeDep) -> JSONResponse:
    """Each dependency's state, the sandbox in use and its warnings; 503 until all are ready."""
    states = await runtime.clients.dependency_states()
    sandbox: dict[str, object] = {}
    warnings: list[str] = []
    try:
        described = await runtime.clients.describe_sandbox()
        sandbox = {"backend": described.backend, "insecure": described.insecure}
        warnings += list(described.warnings)
        if described.insecure:
            warnings.append(
                "SANDBOX DISABLED: the tool-runner runs commands with no isolation (backend=none)"
            )
    except grpc.RpcError as exc:
        sandbox = {"error": exc.code().name}
    view = ReadyView(
        ready=all(s.ok for s in states),
        dependencies=[DependencyView(**s.__dict__) for s in states],
        sandbox=sandbox,
        warnings=warnings,
    )
    return JSONResponse(view.model_dump(), status_code=200 if view.ready else 503)
