"""What Crayfish-as-an-MCP-server adds per call: a chat turn (fake LLM, no tool) and a memory
search, each through REST (the baseline), MCP streamable HTTP at /mcp and MCP stdio
(`crayfish mcp serve`, which forwards to REST). Medians and p95 over 20 calls after 2 warm-ups,
one stack, one MCP session per transport (the session's set-up is not counted)."""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from figures import percentile

from tests.conftest import DEFAULT_FILES
from tests.fakes import FakeLLM
from tests.stacks import running_stack, wait_task

CALLS, WARM = 20, 2
CLI = [sys.executable, "-m", "crayfish_cli"]
QUERY = "database chosen for billing"


def timed_sync(call: Callable[[], object]) -> list[float]:
    timings = []
    for _ in range(CALLS + WARM):
        started = time.perf_counter()
        call()
        timings.append((time.perf_counter() - started) * 1000)
    return timings[WARM:]


async def timed(call: Callable[[], Awaitable[object]]) -> list[float]:
    timings = []
    for _ in range(CALLS + WARM):
        started = time.perf_counter()
        await call()
        timings.append((time.perf_counter() - started) * 1000)
    return timings[WARM:]


def rest(url: str) -> dict[str, list[float]]:
    with httpx.Client(base_url=url, timeout=60) as api:

        def chat() -> None:
            task_id = api.post("/api/chat", json={"message": "go"}).json()["task_id"]
            assert wait_task(api, task_id, poll=0.002)["status"] == "completed"

        def search() -> None:
            assert api.post("/api/memory/search", json={"query": QUERY}).json()["hits"]

        return {"chat": timed_sync(chat), "memory_search": timed_sync(search)}


async def over(session: ClientSession) -> dict[str, list[float]]:
    await session.initialize()

    async def chat() -> None:
        assert not (await session.call_tool("chat", {"message": "go"})).is_error

    async def search() -> None:
        assert not (await session.call_tool("memory_search", {"query": QUERY})).is_error

    return {"chat": await timed(chat), "memory_search": await timed(search)}


async def mcp_http(url: str) -> dict[str, list[float]]:
    async with (
        httpx2.AsyncClient(timeout=60) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        return await over(session)


async def mcp_stdio(url: str) -> dict[str, list[float]]:
    server = StdioServerParameters(
        command=CLI[0], args=[*CLI[1:], "mcp", "serve"], env={"CRAYFISH_URL": url}
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        return await over(session)


def main() -> int:
    env = {"CRAYFISH_AUTO_RECALL": "false", "CRAYFISH_LOG_LEVEL": "WARNING"}
    with FakeLLM() as fake, running_stack(fake.base_url, DEFAULT_FILES, env) as stack:
        fake.reply_forever_text("done")
        results = {
            "REST": rest(stack.url),
            "MCP streamable HTTP": asyncio.run(mcp_http(stack.url)),
            "MCP stdio (via REST)": asyncio.run(mcp_stdio(stack.url)),
        }
    print(f"MCP server overhead, fake LLM, {CALLS} calls each (ms)")
    print(f"{'transport':22} {'call':14} {'median':>8} {'p95':>8} {'vs REST':>8}")
    for transport, calls in results.items():
        for call, values in calls.items():
            median = statistics.median(values)
            ratio = median / statistics.median(results["REST"][call])
            print(
                f"{transport:22} {call:14} {median:8.1f} {percentile(values, 0.95):8.1f}"
                f" {ratio:7.2f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
