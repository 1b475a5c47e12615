"""Liveness and readiness: /healthz answers while the process lives, /readyz checks dependencies."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from orchestrator.api.deps import CoreDep
from orchestrator.api.schemas import DependencyView, HealthView, ReadyView
from orchestrator.clients import ServiceError

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=HealthView)
async def healthz() -> HealthView:
    return HealthView()


@router.get("/readyz", response_model=ReadyView, responses={503: {"model": ReadyView}})
async def readyz(core: CoreDep) -> JSONResponse:
    """Each dependency's state (the services and the database), the sandbox in use and its
    warnings; 503 until all are ready. The `llm` entry says whether the provider is configured
    and answers, without counting in `ready` (an outside party; agent/llm_probe.py says why)."""
    states = await core.dependency_states()
    sandbox: dict[str, object] = {}
    warnings: list[str] = []
    try:
        described = await core.describe_sandbox()
        sandbox = {"backend": described.backend, "insecure": described.insecure}
        warnings += described.warnings
        if described.insecure:
            warnings.append(
                "SANDBOX DISABLED: the tool-runner runs commands with no isolation (backend=none)"
            )
    except ServiceError as exc:
        sandbox = {"error": exc.status}
    llm = core.llm_state()
    if llm.trouble:
        warnings.append(llm.line())
    view = ReadyView(
        ready=all(s.ok for s in states),
        llm=llm.view(),
        dependencies=[DependencyView(**asdict(s)) for s in states],
        sandbox=sandbox,
        warnings=warnings,
    )
    return JSONResponse(view.model_dump(), status_code=200 if view.ready else 503)
