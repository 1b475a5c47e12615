"""Builds the FastAPI app from settings: runtime, routers, middleware, error mapping."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from orchestrator.api import health, openai_compat, tasks
from orchestrator.api.auth import BearerAuth, BodyLimit
from orchestrator.api.errors import install_error_handlers
from orchestrator.config import Settings
from orchestrator.runtime import Runtime

log = logging.getLogger(__name__)


def create_app(settings: Settings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = Runtime(settings)
        app.state.runtime = runtime
        runtime.resume_pending()
        try:
            yield
        finally:
            await runtime.close()

    app = FastAPI(
        title="Crayfish",
        version="0.1.0",
        description="Self-hosted personal AI assistant: native task API + OpenAI-compatible API.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    for router in (health.router, tasks.router, openai_compat.router):
        app.include_router(router)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    if settings.api_token:
        app.add_middleware(BearerAuth, token=settings.api_token)
    return app
