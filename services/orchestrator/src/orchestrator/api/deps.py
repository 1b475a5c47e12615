"""FastAPI dependencies: the runtime object built at start-up."""

from __future__ import annotations

from fastapi import Request

from orchestrator.runtime import Runtime


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime
