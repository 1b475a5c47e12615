"""One MCP server kept connected: connect, list tools, call them; reconnect with backoff.

A supervisor task owns the SDK client (its task groups must be entered and left in one task);
calls from other tasks use the connected session. The tool list is fetched again when the
server says it changed (`notifications/tools/list_changed`, or the 2026 `subscriptions/listen`
event), and by a periodic probe, which is also how a dead server is found without a call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.exceptions import MCPError

from connectors.mcp_config import McpServerConfig
from connectors.mcp_results import call_result
from connectors.transports import build_transport

log = logging.getLogger(__name__)

STOP_GRACE = 10.0
CLIENT_INFO = types.Implementation(name="crayfish-connectors", version="0.1.0")
# Errors that mean the connection itself is gone (not a tool's or a request's failure).
BROKEN = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    ConnectionError,
    OSError,
    httpx2.TransportError,
)


@dataclass(frozen=True)
class Limits:
    """How long to wait for what, and how much text a result may carry."""

    connect_timeout: float = 30.0
    backoff_min: float = 0.5
    backoff_max: float = 30.0
    probe_interval: float = 15.0
    max_result_chars: int = 50_000


@dataclass(frozen=True)
class RemoteTool:
    """A tool as its MCP server lists it."""

    name: str
    description: str
    input_schema: dict[str, Any]


class Unavailable(Exception):
    """The server is not connected now; the message says why and that it is reconnecting."""


class McpConnection:
    """States: connecting → ready ⇄ unavailable (reconnecting with backoff) → stopped."""

    def __init__(
        self, config: McpServerConfig, limits: Limits, on_change: Callable[[], None] = lambda: None
    ):
        self.config = config
        self.limits = limits
        self.on_change = on_change
        self.state = "connecting"
        self.error = ""
        self.tools: list[RemoteTool] = []
        self.connects = 0
        self.first_attempt = asyncio.Event()
        self._client: Client | None = None
        self._wake = asyncio.Event()
        self._broken: str | None = None
        self._refresh = False
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.config.name

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.name}")

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            # A server that is still connecting gets cancelled rather than waited for.
            done, _ = await asyncio.wait([self._task], timeout=STOP_GRACE)
            if not done:
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """The tool's result as a ToolResult; Unavailable when not connected."""
        client = self._client
        if client is None or self.state != "ready":
            raise Unavailable(self.unavailable_reason())
        timeout = self.config.timeout
        started = time.monotonic()
        try:
            result = await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.error.code == types.REQUEST_TIMEOUT:
                raise TimeoutError(
                    f"MCP tool {tool!r} on server {self.name!r} did not answer within {timeout:g} s"
                    " (the call was cancelled)"
                ) from exc
            if exc.error.code == types.CONNECTION_CLOSED:
                self._mark_broken(f"connection closed during a call to {tool!r}")
                raise Unavailable(
                    f"MCP server {self.name!r} closed the connection during the call"
                    " (it may have crashed); reconnecting, try again shortly"
                ) from exc
            message = f"MCP server {self.name!r} refused the call: {exc.error.message}"
            raise MCPCallError(message) from exc
        except BROKEN as exc:
            self._mark_broken(f"{type(exc).__name__}: {exc}")
            raise Unavailable(
                f"MCP server {self.name!r} connection failed during the call; reconnecting"
            ) from exc
        converted = call_result(result, self.limits.max_result_chars)
        converted.duration_ms = (time.monotonic() - started) * 1000
        return converted

    def unavailable_reason(self) -> str:
        if self.state == "connecting":
            return f"MCP server {self.name!r} is still connecting; try again shortly"
        return (
            f"MCP server {self.name!r} is unavailable ({self.error or 'not connected'});"
            " reconnecting in the background, its tools come back when it does"
        )

    def _mark_broken(self, reason: str) -> None:
        if self._broken is None:
            self._broken = reason
        self._wake.set()

    async def _supervise(self) -> None:
        backoff = self.limits.backoff_min
        while not self._stopping:
            try:
                await self._connected_session()
            except Exception as exc:
                self._set_unavailable(_describe(exc))
            finally:
                self._client = None
                self.first_attempt.set()
            if self._stopping:
                break
            if self.state == "ready":  # it ran and then broke: retry soon
                self._set_unavailable(self._broken or "connection lost")
                backoff = self.limits.backoff_min
            log.warning(
                "MCP server %s unavailable (%s); reconnecting in %.1fs",
                self.name,
                self.error,
                backoff,
            )
            await self._sleep(backoff)
            backoff = min(backoff * 2, self.limits.backoff_max)
        self.state = "stopped"

    async def _connected_session(self) -> None:
        """One connection's life; returns when it broke or we stop, raises if it never worked."""
        self._broken = None
        client = Client(
            build_transport(self.config),
            mode="auto",
            message_handler=self._on_message,
            client_info=CLIENT_INFO,
        )
        # One scope around the whole session (the SDK's task groups live inside it): its
        # deadline bounds connecting and the first listing, then is lifted.
        with anyio.CancelScope() as scope:
            scope.deadline = anyio.current_time() + self.limits.connect_timeout
            async with client:
                self.tools = await self._list_tools(client)
                scope.deadline = math.inf
                self._client = client
                try:
                    await self._ready_session(client)
                finally:
                    self._client = None
        if scope.cancelled_caught:
            raise TimeoutError("timed out connecting")

    async def _ready_session(self, client: Client) -> None:
        self.connects += 1
        self.state, self.error = "ready", ""
        log.info("MCP server %s ready with %d tools", self.name, len(self.tools))
        self.on_change()
        self.first_attempt.set()
        async with anyio.create_task_group() as group:
            group.start_soon(self._listen, client)
            await self._serve(client)
            group.cancel_scope.cancel()

    async def _serve(self, client: Client) -> None:
        """Until stopped or broken: refresh the tool list on change, probe when idle."""
        while not self._stopping and self._broken is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.limits.probe_interval)
            self._wake.clear()
            if self._stopping or self._broken is not None:
                return
            try:
                with anyio.fail_after(self.limits.connect_timeout):
                    tools = await self._list_tools(client)
            except MCPError as exc:
                if exc.error.code == types.CONNECTION_CLOSED:
                    self._broken = "connection closed"
                continue
            except (TimeoutError, *BROKEN) as exc:
                self._broken = f"not answering: {_describe(exc)}"
                return
            if tools != self.tools:
                self.tools = tools
                log.info("MCP server %s now offers %d tools", self.name, len(tools))
                self.on_change()

    async def _list_tools(self, client: Client) -> list[RemoteTool]:
        tools: list[RemoteTool] = []
        cursor: str | None = None
        for _ in range(100):  # a paginator that never ends cannot hang us
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools += [
                RemoteTool(t.name, t.description or t.title or "", dict(t.input_schema or {}))
                for t in page.tools
            ]
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def _listen(self, client: Client) -> None:
        """Tool-list events on 2026-era connections; handshake-era ones notify instead."""
        try:
            async with client.listen(tools_list_changed=True) as events:
                async for _ in events:
                    self._wake.set()
        except ListenNotSupportedError:
            return
        except Exception as exc:  # the stream ended: the probe finds out whether for good
            log.debug("MCP server %s listen stream ended: %s", self.name, exc)

    async def _on_message(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._wake.set()
        elif isinstance(message, Exception):
            log.warning("MCP server %s sent something unreadable: %s", self.name, message)

    def _set_unavailable(self, reason: str) -> None:
        changed = self.state != "unavailable" or self.error != reason
        self.state, self.error = "unavailable", reason
        if changed:
            self.on_change()

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)
        self._wake.clear()


class MCPCallError(Exception):
    """The server answered the call with a protocol error (unknown tool, bad arguments, ...)."""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out connecting"
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions[:3])
    if isinstance(exc, MCPError):
        return exc.error.message
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "..."
