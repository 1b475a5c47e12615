"""Builds the FastAPI app from settings: the core, routers, middleware, error mapping, metrics."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from crayfish_common.startup_heap import freeze_startup_heap
from crayfish_common.tracing import tracing_enabled
from fastapi import FastAPI

from orchestrator.api import (
    approvals,
    channels,
    consolidation,
    health,
    memory,
    openai_compat,
    ops,
    schedules,
    sessions,
    skills,
    tasks,
    tools,
    usage,
    web,
)
from orchestrator.api.errors import install_error_handlers
from orchestrator.api.middleware import BearerAuth, BodyLimit, HostGuard, RequestMetrics
from orchestrator.api.schemas import ERROR_RESPONSES
from orchestrator.api.trusted_hosts import TrustedHosts
from orchestrator.config import Settings
from orchestrator.core import OrchestratorCore
from orchestrator.mcp_server.http import mount_mcp
from orchestrator.metrics import Metrics


def create_app(settings: Settings, freeze_heap: bool = False) -> FastAPI:
    """The HTTP app. With `freeze_heap` (the service's own process), the heap start-up built is
    frozen once the core has started (`freeze_startup_heap`): never in a test's process."""
    metrics = Metrics()  # its own registry: two apps in one process count apart

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        core = OrchestratorCore(settings, metrics)
        app.state.core = core
        try:
            await core.start()
        except BaseException:
            await core.close()
            raise
        if freeze_heap:  # a process of its own (not a test's app)
            freeze_startup_heap()
        try:
            async with mcp_sessions:
                yield
        finally:
            await core.close()

    app = FastAPI(
        title="Crayfish",
        version="0.1.0",
        description="Self-hosted personal AI assistant: native task API + OpenAI-compatible API.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    # The OpenAI-compatible routes first: every client turn comes there, matched at the first try.
    routers = [
        openai_compat,
        health,
        approvals,
        channels,
        tasks,
        sessions,
        schedules,
        memory,
        skills,
        tools,
        usage,
        ops,
        consolidation,
        web,
    ]
    for module in routers:
        app.include_router(module.router, responses=ERROR_RESPONSES)
    mcp_sessions = mount_mcp(app)
    app.add_middleware(RequestMetrics, metrics=metrics)
    # A message may carry images as base64 (4 bytes for 3) on top of its text.
    images = settings.images_per_message * (settings.image_max_bytes * 4 // 3 + 64)
    with_images = settings.max_body_bytes + images
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.max_body_bytes,
        path_limits={
            "/api/skills/install": settings.max_upload_bytes,
            "/api/chat": with_images,
            "/v1/chat/completions": with_images,
        },
    )
    if settings.api_token:
        app.add_middleware(
            BearerAuth, token=settings.api_token, channels_token=settings.channels_token
        )
    # Outermost: a request from a rebound name or another site's page goes no further.
    trusted = TrustedHosts.for_bind(settings.http_host, settings.trusted_hosts)
    app.add_middleware(HostGuard, trusted=trusted)
    if tracing_enabled():
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz,metrics")
    return app
