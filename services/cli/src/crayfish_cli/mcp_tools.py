"""The MCP server's tools, over a backend that reaches Crayfish (in-process or over REST)."""

from __future__ import annotations

from typing import Annotated, Protocol

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

SERVER_NAME = "crayfish"
INSTRUCTIONS = (
    "Crayfish is the user's self-hosted assistant: it has their workspace files, a sandbox to "
    "run commands in, skills, and a memory of past work. `chat` gives it a task and returns its "
    "answer (pass the returned session_id to continue the conversation); `memory_search` finds "
    "notes in its memory, each with a citation path#Lx-Ly."
)


class ChatAnswer(BaseModel):
    answer: str = Field(description="The assistant's answer.")
    session_id: str = Field(description="Pass it to continue this conversation.")
    task_id: str


# A memory hit as the MCP tool shows it: fewer fields than the REST API's. (A docstring here
# would show in the tool's output schema.)
class CitedSnippet(BaseModel):
    citation: str = Field(description="path#Lx-Ly: the file and lines the snippet comes from.")
    score: float
    snippet: str


class MemoryHits(BaseModel):
    hits: list[CitedSnippet]


class BackendError(Exception):
    """Crayfish could not do it; the message says why (an MCP tool error)."""


class CrayfishBackend(Protocol):
    """How the tools reach Crayfish."""

    async def chat(self, message: str, session_id: str | None) -> ChatAnswer: ...

    async def memory_search(self, query: str, k: int) -> MemoryHits: ...


def build_mcp_server(backend: CrayfishBackend) -> MCPServer:
    """An MCP server offering Crayfish's chat and memory search."""
    server: MCPServer = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(
        description="Ask the Crayfish assistant to do something or answer something: it runs a "
        "whole turn (tools, memory, skills) and returns its final answer."
    )
    async def chat(
        message: Annotated[str, Field(min_length=1, description="What to ask or tell it.")],
        session_id: Annotated[
            str | None, Field(description="Continue this conversation (from an earlier answer).")
        ] = None,
    ) -> ChatAnswer:
        try:
            return await backend.chat(message, session_id or None)
        except BackendError as exc:
            raise ToolError(str(exc)) from exc

    @server.tool(
        description="Search the assistant's memory (MEMORY.md, memory/ notes) for notes about "
        "a question; each hit has a citation path#Lx-Ly and a snippet."
    )
    async def memory_search(
        query: Annotated[str, Field(min_length=1, description="What to look for.")],
        k: Annotated[int, Field(ge=1, le=50, description="How many hits at most.")] = 6,
    ) -> MemoryHits:
        try:
            return await backend.memory_search(query, k)
        except BackendError as exc:
            raise ToolError(str(exc)) from exc

    return server
