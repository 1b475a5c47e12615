"""The MCP transport for a configured server: a child process (stdio), streamable HTTP or SSE.

A stdio server gets a clean environment: a fixed PATH, HOME, LANG and its own `env`, nothing of
ours (the SDK adds only HOME, LOGNAME, PATH, SHELL, TERM and USER, which we override where we can).
Its program, folder and PATH must lie outside the workspace (`workspace_problem`).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx2
from mcp.client._transport import Transport
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from connectors.mcp_config import McpServerConfig

CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"
HTTP_TIMEOUT = 30.0
# A server may hold a response stream open between events.
HTTP_READ_TIMEOUT = 300.0


def clean_environment(own: dict[str, str]) -> dict[str, str]:
    """What a stdio server sees: PATH, HOME, LANG and whatever its config entry sets."""
    base = {
        "PATH": CLEAN_PATH,
        "HOME": tempfile.gettempdir(),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        # The SDK merges these from our environment unless we set them; they carry no secrets
        # but say nothing useful either.
        "LOGNAME": "mcp",
        "USER": "mcp",
        "SHELL": "/bin/sh",
        "TERM": "dumb",
    }
    return {**base, **own}


def workspace_problem(server: McpServerConfig, workspace: Path) -> str | None:
    """Why this stdio server would run something a sandboxed command could have written: its
    `cwd`, its program (as the child would find it, symlinks resolved) or a folder of its PATH
    inside the workspace; None when all are outside."""
    folder = Path(os.path.realpath(workspace))
    cwd = Path(os.path.realpath(server.cwd or os.getcwd()))
    if server.cwd and cwd.is_relative_to(folder):
        return f'"cwd" {server.cwd} is inside the workspace {workspace}'
    search = server.env.get("PATH", CLEAN_PATH)
    for entry in search.split(os.pathsep):
        if entry and Path(os.path.realpath(cwd / entry)).is_relative_to(folder):
            return f'the PATH folder {entry} in "env" is inside the workspace {workspace}'
    command = server.command
    if os.sep not in command:  # found on the child's PATH, as exec does
        command = shutil.which(command, path=search) or ""
    if command and Path(os.path.realpath(cwd / command)).is_relative_to(folder):
        return f'"command" {server.command} is inside the workspace {workspace}'
    return None


def build_transport(server: McpServerConfig) -> Any:
    """A fresh transport (an async context manager yielding the two message streams)."""
    if server.transport == "stdio":
        params = StdioServerParameters(
            command=server.command,
            args=list(server.args),
            env=clean_environment(dict(server.env)),
            cwd=server.cwd,
            encoding_error_handler="replace",
        )
        return stdio_client(params, errlog=sys.stderr)
    headers = dict(server.headers)
    if server.transport == "sse":
        return sse_client(
            server.url, headers=headers, timeout=HTTP_TIMEOUT, sse_read_timeout=HTTP_READ_TIMEOUT
        )
    client = httpx2.AsyncClient(
        headers=headers, timeout=httpx2.Timeout(HTTP_TIMEOUT, read=HTTP_READ_TIMEOUT)
    )
    transport: Transport = streamable_http_client(server.url, http_client=client)
    return _ClosingTransport(transport, client)


class _ClosingTransport:
    """A streamable HTTP transport that also closes the HTTP client it was given."""

    def __init__(self, inner: Transport, client: httpx2.AsyncClient):
        self.inner = inner
        self.client = client

    async def __aenter__(self) -> Any:
        return await self.inner.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.inner.__aexit__(*exc)
        finally:
            await self.client.aclose()
