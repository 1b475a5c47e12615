"""Streamable HTTP at /mcp on the orchestrator's app (behind its bearer-token middleware)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp

from orchestrator.core import OrchestratorCore
from orchestrator.mcp_server.in_process import CoreBackend
from orchestrator.mcp_server.tools import build_mcp_server

MCP_PATH = "/mcp"


def mount_mcp(app: FastAPI, host: str) -> AbstractAsyncContextManager[None]:
    """Adds the /mcp route; the returned context must run while the app serves (lifespan).

    Stateless: every request stands alone, so any orchestrator replica answers any request.
    Bound to loopback, the SDK also checks Host and Origin headers (DNS rebinding).
    """

    def core() -> OrchestratorCore:
        found: OrchestratorCore = app.state.core
        return found

    server = build_mcp_server(CoreBackend(core))
    server.streamable_http_app(stateless_http=True, json_response=True, host=host)
    manager = server.session_manager
    app.add_route(MCP_PATH, StreamableHTTPASGIApp(manager), include_in_schema=False)  # type: ignore[arg-type]
    return manager.run()
