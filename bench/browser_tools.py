"""The browser service's tools on loopback pages: latency per tool over real gRPC (medians), the
first open (Chromium's start included), and memory per browser context (proportional set size of
all Chromium processes, with 1..N contexts each holding one page).

Run: .venv/bin/python bench/browser_tools.py [--runs 10] [--contexts 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import grpc
from browser.pool import BrowserPool
from browser.tools import browser_tools
from crayfish.common.v1 import tools_pb2, tools_pb2_grpc
from crayfish_common.grpc_server import GrpcService
from crayfish_common.tool_service import TOOL_SERVICE_NAME, ToolSetServicer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "services" / "browser"))
from tests.conftest import (  # noqa: E402  (the test suite's local pages, reused)
    HAVE_CHROMIUM,
    Site,
    _private_app,
    _serve,
    _site_app,
    browser_settings,
)

MiB = 1024 * 1024


async def call(stub, name: str, session: str = "bench", **args: object):  # type: ignore[no-untyped-def]
    request = tools_pb2.RunToolRequest(
        name=name, arguments_json=json.dumps(args), session_id=session
    )
    started = time.perf_counter()
    reply = await stub.RunTool(request, timeout=60)
    assert reply.ok, reply.output
    return reply, (time.perf_counter() - started) * 1000


def ref_of(output: str, label: str) -> str:
    line = next(line for line in output.splitlines() if label in line and "[ref=" in line)
    return line.split("[ref=", 1)[1].split("]", 1)[0]


async def latencies(stub, site: Site, runs: int) -> dict[str, list[float]]:  # type: ignore[no-untyped-def]
    times: dict[str, list[float]] = {}

    def note(name: str, ms: float) -> None:
        times.setdefault(name, []).append(ms)

    _, first = await call(stub, "browser_open", url=f"{site.url}/form")
    print(f"first browser_open (Chromium start + context + page): {first:.0f} ms")
    for _ in range(runs):
        opened, ms = await call(stub, "browser_open", url=f"{site.url}/form")
        note("browser_open", ms)
        note("browser_snapshot", (await call(stub, "browser_snapshot"))[1])
        field = ref_of(opened.output, 'textbox "Your name"')
        note("browser_type", (await call(stub, "browser_type", ref=field, text="Ada"))[1])
        button = ref_of(opened.output, 'button "Send"')
        note("browser_click", (await call(stub, "browser_click", ref=button))[1])
        note("browser_back", (await call(stub, "browser_back"))[1])
        note("browser_screenshot", (await call(stub, "browser_screenshot"))[1])
        note(
            "browser_open (JS page)",
            (await call(stub, "browser_open", url=f"{site.url}/rendered"))[1],
        )
        note("browser_close", (await call(stub, "browser_close"))[1])
    return times


async def memory_per_context(pool: BrowserPool, stub, site: Site, contexts: int) -> None:  # type: ignore[no-untyped-def]
    await asyncio.sleep(1)
    base = await pool.memory()
    print(f"Chromium with no context: {base / MiB:.0f} MiB (PSS)")
    for count in range(1, contexts + 1):
        await call(stub, "browser_open", session=f"m{count}", url=f"{site.url}/rendered")
        await asyncio.sleep(1)
        used = await pool.memory()
        print(
            f"{count} context(s), one page each: {used / MiB:.0f} MiB,"
            f" {(used - base) / count / MiB:.0f} MiB per context"
        )


async def main(runs: int, contexts: int) -> None:
    if not HAVE_CHROMIUM:
        print("skipped: Debian's chromium is not installed (make system-deps-test)")
        return
    hits: list[str] = []
    private_runner, private_url = await _serve(_private_app(hits))
    runner, url = await _serve(_site_app(private_url, []))
    site = Site(url, private_url, hits)
    workspace = Path(tempfile.mkdtemp(prefix="crayfish-bench-browser-"))
    pool = BrowserPool(browser_settings(site, workspace, max_contexts=contexts + 1))
    service = GrpcService([TOOL_SERVICE_NAME], [ToolSetServicer(browser_tools(pool)).register])
    port = await service.start("127.0.0.1:0")
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = tools_pb2_grpc.ToolServiceStub(channel)
            times = await latencies(stub, site, runs)
            print(f"\nmedian over {runs} runs (ms), gRPC round trip included:")
            for name, values in times.items():
                print(f"  {name:24} {statistics.median(values):7.1f}   (max {max(values):.1f})")
            print()
            await memory_per_context(pool, stub, site, contexts)
    finally:
        await service.stop(0)
        await pool.close()
        await runner.cleanup()
        await private_runner.cleanup()
    print(f"\n{os.cpu_count()} cores; requests that reached the private server: {len(hits)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--contexts", type=int, default=4)
    options = parser.parse_args()
    asyncio.run(main(options.runs, options.contexts))
