"""Every configured MCP server's tools as Crayfish tools named `mcp_<server>_<tool>`.

A server that is down keeps its last known tools in the list, each described as unavailable, and
a call to one says so; the list changes (and `version` goes up) when any server's tools or state
change.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, ClassVar

from crayfish_common.tools import CallContext, Tool, ToolError, ToolResult

from connectors.mcp_config import McpConfig
from connectors.mcp_connection import Limits, MCPCallError, McpConnection, RemoteTool, Unavailable
from connectors.naming import assign_names
from connectors.schema import normalise_schema

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerStatus:
    """What ListServers reports for one server."""

    name: str
    transport: str
    state: str
    error: str
    tool_count: int


class McpTool(Tool):
    """One MCP server's tool; subclasses made by `mcp_tool` carry its name and schema."""

    connection: ClassVar[McpConnection]
    remote_name: ClassVar[str]

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        try:
            result: ToolResult = await self.connection.call(self.remote_name, args)
        except (Unavailable, TimeoutError, MCPCallError) as exc:
            raise ToolError(str(exc)) from exc
        return result


def mcp_tool(
    name: str, connection: McpConnection, remote: RemoteTool, max_description: int
) -> McpTool:
    """A tool object for `remote` under the model-facing `name`."""
    description = (
        " ".join(remote.description.split()) or f"{remote.name} (MCP server {connection.name})"
    )
    if len(description) > max_description:
        description = description[: max_description - 3].rstrip() + "..."
    if connection.state != "ready":
        description = f"[unavailable: MCP server {connection.name} is reconnecting] {description}"
    cls = type(
        f"McpTool_{name}",
        (McpTool,),
        {
            "name": name,
            "description": description,
            "parameters": normalise_schema(remote.input_schema),
            "connection": connection,
            "remote_name": remote.name,
        },
    )
    tool: McpTool = cls()
    return tool


class McpBridge:
    """The connections of one configuration; `tools()` is the current list."""

    def __init__(self, config: McpConfig, limits: Limits, max_description: int = 1024):
        self.max_description = max_description
        self.version = 0
        self.connections = {
            server.name: McpConnection(server, limits, self._changed) for server in config.servers
        }
        self._cache: tuple[int, list[McpTool]] | None = None

    def _changed(self) -> None:
        self.version += 1

    async def start(self, wait: float) -> None:
        """Starts every connection and waits up to `wait` seconds for their first attempts."""
        for connection in self.connections.values():
            connection.start()
        if self.connections:
            waits = [c.first_attempt.wait() for c in self.connections.values()]
            try:
                await asyncio.wait_for(asyncio.gather(*waits), wait)
            except TimeoutError:
                slow = [c.name for c in self.connections.values() if not c.first_attempt.is_set()]
                log.warning("MCP servers still connecting after %.0fs: %s", wait, ", ".join(slow))

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.connections.values()))

    def tools(self) -> list[McpTool]:
        """Every offered tool of every server that has listed its tools at least once."""
        if self._cache is not None and self._cache[0] == self.version:
            return self._cache[1]
        version = self.version
        offered = [
            (connection, remote)
            for connection in self.connections.values()
            for remote in connection.tools
            if connection.config.offers(remote.name)
        ]
        names = assign_names((c.name, r.name) for c, r in offered)
        tools = [mcp_tool(names[(c.name, r.name)], c, r, self.max_description) for c, r in offered]
        tools.sort(key=lambda t: t.name)
        self._cache = (version, tools)
        return tools

    def statuses(self) -> list[ServerStatus]:
        return [
            ServerStatus(
                c.name,
                c.config.transport,
                c.state,
                c.error,
                sum(1 for t in c.tools if c.config.offers(t.name)),
            )
            for c in self.connections.values()
        ]
