"""A real MCP server (the `mcp` SDK) for the connectors tests: stdio, streamable HTTP or SSE.

    python toy_server.py [stdio | streamable-http PORT | sse PORT]

Tools: `echo` works, `fail` raises ToolError (an isError result), `hang` never answers, `crash`
kills the server, `environment` returns the server's environment, `grow` adds a tool and sends
`notifications/tools/list_changed`, `deep` has a schema with $ref/$defs to normalise.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

server = MCPServer("toy")


class Point(BaseModel):
    x: int
    y: int


@server.tool(description="Echoes the text back.")
def echo(text: str) -> str:
    return f"echo: {text}"


@server.tool(description="Always fails with a readable message.")
def fail(reason: str = "it broke") -> str:
    raise ToolError(f"the toy server refused: {reason}")


@server.tool(description="Never answers.")
async def hang() -> str:
    await asyncio.sleep(3600)
    return "woke up"


@server.tool(description="Kills the server process mid-call.")
def crash() -> str:
    os._exit(3)


@server.tool(description="The server's environment as JSON.")
def environment() -> str:
    return json.dumps(dict(os.environ), sort_keys=True)


@server.tool(description="Measures the distance between two points.")
def deep(a: Point, b: Point) -> str:
    return str(abs(a.x - b.x) + abs(a.y - b.y))


def shout(text: str) -> str:
    """Upper-cases the text."""
    return text.upper()


@server.tool(description="Adds the `shout` tool and tells the client the tool list changed.")
async def grow(ctx: Context) -> str:
    if "shout" not in {t.name for t in await server.list_tools()}:
        server.add_tool(shout, description="Upper-cases the text.")
    await notify_tools_changed(ctx)
    return "grown"


async def notify_tools_changed(ctx: Context) -> None:
    """The legacy notification (handshake-era clients) and the 2026 listen event."""
    session: Any = ctx.session
    if hasattr(session, "send_tool_list_changed"):
        await session.send_tool_list_changed()
    try:
        await ctx.notify_tools_changed()
    except ValueError:  # no subscription bus on this connection
        pass


def main() -> None:
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if transport == "stdio":
        server.run("stdio")
    elif transport == "streamable-http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif transport == "sse":
        server.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        raise SystemExit(f"unknown transport {transport}")


if __name__ == "__main__":
    main()
