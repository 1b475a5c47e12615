"""Per-call overhead of an MCP tool through the connectors service, per transport (stdio,
streamable HTTP, SSE), against a built-in tool (the tool-runner's read_file), gRPC round trip
included; plus the bare MCP call (SDK client straight to the server) to show what the bridge adds.

Run: .venv/bin/python bench/tool_call_overhead.py [--runs 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from connectors.config import ConnectorsSettings
from connectors.server import start_service as start_connectors
from crayfish.common.v1 import tools_pb2
from crayfish.connectors.v1 import connectors_pb2_grpc
from crayfish.tool_runner.v1 import tool_runner_pb2_grpc
from crayfish_common.channels import aio_channel
from figures import percentile
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters
from tool_runner.config import ToolRunnerSettings
from tool_runner.server import start_service as start_tool_runner

TOY = Path(__file__).resolve().parents[1] / "services/connectors/tests/mcp_servers/toy_server.py"
Call = Callable[[], Awaitable[object]]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def timed(call: Call, runs: int, warmup: int = 10) -> list[float]:
    for _ in range(warmup):
        await call()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1000)
    return times


def start_http_toy(transport: str) -> tuple[subprocess.Popen[bytes], str]:
    """The toy server over "streamable-http" or "sse" on a loopback port, and its URL."""
    port = free_port()
    path = "/sse" if transport == "sse" else "/mcp"
    process = subprocess.Popen(
        [sys.executable, str(TOY), transport, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return process, f"http://127.0.0.1:{port}{path}"
        time.sleep(0.05)
    process.kill()
    raise RuntimeError("toy server did not start")


async def built_in(root: Path, runs: int) -> list[float]:
    """read_file of a small file through the tool-runner over gRPC (the baseline)."""
    workspace = root / "workspace"
    workspace.mkdir()
    (workspace / "note.txt").write_text("echo: hello\n")
    settings = ToolRunnerSettings(
        host="127.0.0.1", port=0, workspace=workspace, data_dir=root / "tr", sandbox="none"
    )
    service, core = await start_tool_runner(settings)
    channel = aio_channel(f"127.0.0.1:{service.port}")
    stub = tool_runner_pb2_grpc.ToolRunnerServiceStub(channel)
    request = tools_pb2.RunToolRequest(name="read_file", arguments_json='{"path": "note.txt"}')

    async def call() -> object:
        reply = await stub.RunTool(request)
        assert reply.ok, reply.output
        return reply

    try:
        return await timed(call, runs)
    finally:
        await channel.close()
        await service.stop(0)
        await core.close()


async def through_connectors(root: Path, urls: dict[str, str], runs: int) -> dict[str, list[float]]:
    """mcp_<server>_echo over gRPC through the connectors servicer, per transport."""
    config = root / "mcp.json"
    servers = {
        "stdio": {"command": sys.executable, "args": [str(TOY)]},
        "http": {"url": urls["http"]},
        "sse": {"url": urls["sse"], "transport": "sse"},
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    settings = ConnectorsSettings(
        host="127.0.0.1", port=0, workspace=root / "workspace", mcp_config=config
    )
    service, core = await start_connectors(settings)
    channel = aio_channel(f"127.0.0.1:{service.port}")
    stub = connectors_pb2_grpc.ConnectorsServiceStub(channel)
    results = {}
    try:
        for server in servers:
            request = tools_pb2.RunToolRequest(
                name=f"mcp_{server}_echo", arguments_json='{"text": "hello"}'
            )

            async def call(request: tools_pb2.RunToolRequest = request) -> object:
                reply = await stub.RunTool(request)
                assert reply.ok, reply.output
                return reply

            results[server] = await timed(call, runs)
    finally:
        await channel.close()
        await service.stop(0)
        await core.stop()
    return results


async def bare(urls: dict[str, str], runs: int) -> dict[str, list[float]]:
    """The SDK client straight to the toy server: the MCP floor, no bridge, no gRPC."""
    targets: dict[str, Any] = {
        "stdio": StdioServerParameters(command=sys.executable, args=[str(TOY)]),
        "http": urls["http"],
        "sse": sse_client(urls["sse"]),
    }
    results = {}
    for name, target in targets.items():
        async with Client(target) as client:

            async def call(client: Client = client) -> object:
                return await client.call_tool("echo", {"text": "hello"})

            results[name] = await timed(call, runs)
    return results


def line(label: str, samples: list[float], baseline: float) -> str:
    median = percentile(samples, 0.5)
    return (
        f"{label:<50} median {median:7.2f} ms  p95 {percentile(samples, 0.95):7.2f} ms"
        f"  x{median / baseline:5.1f} of built-in"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    root = Path(tempfile.mkdtemp(prefix="crayfish-bench-mcp-", dir="/tmp"))
    os.chmod(root, 0o755)  # the tool-runner checks its sandbox uid can reach the workspace
    toys = {"http": start_http_toy("streamable-http"), "sse": start_http_toy("sse")}
    urls = {name: url for name, (_, url) in toys.items()}
    try:
        baseline_samples = await built_in(root, args.runs)
        bridged = await through_connectors(root, urls, args.runs)
        floor = await bare(urls, args.runs)
    finally:
        for process, _ in toys.values():
            process.terminate()
            process.wait(10)
        shutil.rmtree(root, ignore_errors=True)
    baseline = percentile(baseline_samples, 0.5)
    print(f"tool call overhead, {args.runs} calls each (gRPC round trip included where named)")
    print(line("built-in read_file (tool-runner, gRPC)", baseline_samples, baseline))
    print(line("MCP echo over stdio (connectors, gRPC)", bridged["stdio"], baseline))
    print(line("MCP echo over streamable HTTP (connectors, gRPC)", bridged["http"], baseline))
    print(line("MCP echo over SSE (connectors, gRPC)", bridged["sse"], baseline))
    print(line("bare SDK call over stdio (no bridge, no gRPC)", floor["stdio"], baseline))
    print(line("bare SDK call over streamable HTTP", floor["http"], baseline))
    print(line("bare SDK call over SSE", floor["sse"], baseline))
    for transport in ("stdio", "http", "sse"):
        added = percentile(bridged[transport], 0.5) - percentile(floor[transport], 0.5)
        print(f"bridge + gRPC add {added:.2f} ms per call over {transport} (median vs bare SDK)")


if __name__ == "__main__":
    asyncio.run(main())
