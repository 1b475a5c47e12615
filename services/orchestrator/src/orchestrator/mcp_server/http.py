"""Streamable HTTP at /mcp on the orchestrator's app (behind its bearer-token middleware)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from crayfish_cli.mcp_tools import build_mcp_server
from fastapi import FastAPI
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings

from orchestrator.core import OrchestratorCore
from orchestrator.mcp_server.in_process import CoreBackend

MCP_PATH = "/mcp"


def mount_mcp(app: FastAPI) -> AbstractAsyncContextManager[None]:
    """Adds the /mcp route; the returned context must run while the app serves (lifespan).

    Stateless: every request stands alone, so any orchestrator replica answers any request.
    Host and Origin are checked for the whole app (api/middleware.py HostGuard), by the same
    rules as every route: the SDK's own check (loopback binds only) is off.
    """

    def core() -> OrchestratorCore:
        found: OrchestratorCore = app.state.core
        return found

    server = build_mcp_server(CoreBackend(core))
    unchecked = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    server.streamable_http_app(
        stateless_http=True, json_response=True, transport_security=unchecked
    )
    manager = server.session_manager
    app.add_route(MCP_PATH, StreamableHTTPASGIApp(manager), include_in_schema=False)  # type: ignore[arg-type]
    return _in_own_task(manager.run)


@asynccontextmanager
async def _in_own_task(
    run: Callable[[], AbstractAsyncContextManager[None]],
) -> AsyncIterator[None]:
    """Holds `run()` open in a task of its own: the SDK's task group must be left in the task
    that entered it, and a lifespan's start and end may run in different tasks (test clients)."""
    started, stopping = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with run():
            started.set()
            await stopping.wait()

    holder = asyncio.create_task(hold(), name="mcp-sessions")
    ready = asyncio.create_task(started.wait())
    await asyncio.wait([holder, ready], return_when=asyncio.FIRST_COMPLETED)
    if holder.done():
        ready.cancel()
        holder.result()  # raises what stopped it
        raise RuntimeError("the MCP session manager stopped at start-up")
    try:
        yield
    finally:
        stopping.set()
        await holder
