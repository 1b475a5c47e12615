"""Latency of one web_search call through the connectors service over gRPC, per provider
(SearXNG, Brave, Tavily), against the loopback fakes (tests/fakes/search_apis.py): with the
cache off (the provider is asked each time) and on (a repeated query: the cache answers). Five
results per call. The fakes run in a process of their own (in this one they would share its GIL).

Run: .venv/bin/python bench/web_search_latency.py [--runs 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from connectors.config import ConnectorsSettings
from connectors.server import start_service
from crayfish.common.v1 import tools_pb2
from crayfish.connectors.v1 import connectors_pb2_grpc
from crayfish_common.channels import aio_channel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from figures import percentile

from tests.fakes.search_apis import FakeSearchApis

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


def settings(provider: str, fake: FakeSearchApis, cache_seconds: float) -> ConnectorsSettings:
    keys = {"searxng": "", "brave": fake.brave_token, "tavily": fake.tavily_key}
    return ConnectorsSettings(
        host="127.0.0.1",
        port=0,
        mcp_config=None,
        web_search_provider=provider,
        web_search_url=fake.base_url,
        web_search_api_key=keys[provider],
        web_search_cache_seconds=cache_seconds,
    )


async def search_times(
    provider: str, fake: FakeSearchApis, runs: int, cache_seconds: float
) -> list[float]:
    service, core = await start_service(settings(provider, fake, cache_seconds))
    channel = aio_channel(f"127.0.0.1:{service.port}")
    stub = connectors_pb2_grpc.ConnectorsServiceStub(channel)

    async def search() -> None:
        arguments = json.dumps({"query": "crayfish fact", "count": 5})
        reply = await stub.RunTool(
            tools_pb2.RunToolRequest(name="web_search", arguments_json=arguments)
        )
        assert reply.ok, reply.output

    try:
        return await timed(search, runs)
    finally:
        await channel.close()
        await service.stop(0)
        await core.stop()


FAKE = """
import sys, threading
from tests.fakes.search_apis import FakeSearchApis
with FakeSearchApis(port=int(sys.argv[1])) as fake:
    for n in range(20):
        fake.add(f"Crayfish page {n}", f"https://example.org/{n}", f"crayfish fact {n}")
    print("ready", flush=True)
    threading.Event().wait()
"""


ROOT = Path(__file__).resolve().parent.parent


async def measure(fake: FakeSearchApis, runs: int) -> list[tuple[str, list[float]]]:
    rows = []
    for provider in ("searxng", "brave", "tavily"):
        for kind, cache_seconds in (("asks the provider", 0.0), ("from the cache", 300.0)):
            times = await search_times(provider, fake, runs, cache_seconds)
            rows.append((f"web_search via {provider}, {kind}", times))
    return rows


def main(runs: int) -> None:
    logging.disable(logging.INFO)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", FAKE, str(port)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        fake = FakeSearchApis(port=port)  # its keys and address; the process serves
        fake.base_url = f"http://127.0.0.1:{port}"
        rows = asyncio.run(measure(fake, runs))
    finally:
        process.kill()
        process.wait()
    print(f"{'call':<48} {'median ms':>9} {'p90 ms':>8}")
    for name, times in rows:
        print(f"{name:<48} {percentile(times, 0.5):>9.2f} {percentile(times, 0.9):>8.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    main(parser.parse_args().runs)
