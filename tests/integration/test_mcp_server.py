"""Crayfish as an MCP server, through the mcp SDK's real client: streamable HTTP at /mcp on a
whole stack (with an API token), and stdio through `crayfish mcp serve` forwarding over REST."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, Reply

API_TOKEN = "mcp-test-token"
# This tree's CLI (the installed `crayfish` script may belong to another checkout).
CRAYFISH_CLI = [sys.executable, "-m", "crayfish_cli"]


@asynccontextmanager
async def http_session(url: str, token: str | None = API_TOKEN) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def stdio_session(url: str, token: str = API_TOKEN) -> AsyncIterator[ClientSession]:
    server = StdioServerParameters(
        command=CRAYFISH_CLI[0],
        args=[*CRAYFISH_CLI[1:], "mcp", "serve"],
        env={"CRAYFISH_URL": url, "CRAYFISH_API_TOKEN": token},
    )
    async with (
        stdio_client(server) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


def history_size(body: dict[str, Any]) -> Reply:
    return Reply(text=f"I see {len(body['messages'])} messages.")


async def check_tools_and_chat(session: ClientSession, fake_llm: FakeLLM) -> None:
    listed = await session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) >= {"chat", "memory_search"}
    assert tools["chat"].input_schema["required"] == ["message"]
    fake_llm.reply_text("Hello from Crayfish.")
    first = await session.call_tool("chat", {"message": "say hello"})
    assert not first.is_error, text_of(first)
    assert first.structured_content["answer"] == "Hello from Crayfish."
    session_id = first.structured_content["session_id"]
    fake_llm.reply_with(history_size)
    second = await session.call_tool("chat", {"message": "again", "session_id": session_id})
    # system, user, assistant, user: the second call continued the first conversation
    assert second.structured_content["answer"] == "I see 4 messages."
    assert json.loads(text_of(second))["session_id"] == session_id


async def check_memory_search(session: ClientSession) -> None:
    query = {"query": "database chosen for billing", "k": 2}
    found = await session.call_tool("memory_search", query)
    assert not found.is_error, text_of(found)
    hits = found.structured_content["hits"]
    assert 1 <= len(hits) <= 2
    assert hits[0]["citation"].startswith("MEMORY.md#L") and "PostgreSQL" in hits[0]["snippet"]


async def test_streamable_http_offers_chat_and_memory_search(stack: LocalStack, fake_llm: FakeLLM):
    async with http_session(stack.url) as session:
        await check_tools_and_chat(session, fake_llm)
        await check_memory_search(session)


async def test_a_failed_turn_is_an_error_result_with_its_reason(stack: LocalStack, fake_llm):
    fake_llm.reply_error(400, "model `nope` does not exist", type="invalid_request_error")
    async with http_session(stack.url) as session:
        result = await session.call_tool("chat", {"message": "hi"})
    assert result.is_error
    assert "failed" in text_of(result) and "does not exist" in text_of(result)


def test_mcp_needs_the_bearer_token(stack: LocalStack):
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    headers = {"accept": "application/json, text/event-stream"}
    for auth in ({}, {"authorization": "Bearer wrong"}):
        refused = httpx.post(f"{stack.url}/mcp", json=initialize, headers={**headers, **auth})
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"]["code"] == "invalid_api_key"
    accepted = httpx.post(
        f"{stack.url}/mcp",
        json=initialize,
        headers={**headers, "authorization": f"Bearer {API_TOKEN}"},
    )
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["result"]["serverInfo"]["name"] == "crayfish"


async def test_crayfish_mcp_serve_forwards_over_rest(stack: LocalStack, fake_llm: FakeLLM):
    async with stdio_session(stack.url) as session:
        await check_tools_and_chat(session, fake_llm)
        await check_memory_search(session)


async def test_crayfish_mcp_serve_says_when_the_token_is_wrong(stack: LocalStack):
    async with stdio_session(stack.url, token="wrong") as session:
        result = await session.call_tool("memory_search", {"query": "anything"})
    assert result.is_error and "401" in text_of(result) and "CRAYFISH_API_TOKEN" in text_of(result)
