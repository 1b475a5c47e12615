"""Tool-schema tokens per LLM request with 0, 20 and 150 MCP tools, with and without tool search.

The MCP tools come from a real MCP server written with the `mcp` SDK (tests/fakes/mcp_tools.py:
generated MCP-like tools, a few documented parameters each, schemas as the SDK makes them) that
the connectors service of a whole stack runs over stdio from a CONNECTORS_MCP_CONFIG file; they
reach the model as `mcp_gen_<tool>`. The figures are read from the requests the orchestrator
actually sends to the fake LLM: the `tools` array and the system prompt's Tooling section.
"search" is CRAYFISH_TOOL_SEARCH_THRESHOLD=40, "all" is 0 (every schema always). With search, a
second figure is the request after one tool_search found 6 tools.

A second section keeps the earlier stand-in: the same generated tools from a custom gRPC tool
service (tests/fakes/generated_tools.py, hand-written schemas, no `mcp_` prefix) added with
CRAYFISH_TOOL_SERVICES (`--source mcp` skips it). The 0-tool row is measured once, for both.

Tokens: tiktoken's o200k_base when tiktoken and its encoding file are available offline; otherwise
an approximation, characters / 4 (OpenAI's rule of thumb for English; JSON schemas tokenize a
little denser, so the true counts are somewhat higher, the ratios about the same). The script
says which it used.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from crayfish_common.healthcheck import check

from devstack.launcher import free_port
from tests.fakes import FakeLLM
from tests.stacks import running_stack, wait_task

ROOT = Path(__file__).resolve().parent.parent
COUNTS = (0, 20, 150)
MODES = (("all", 0), ("search", 40))
Row = tuple[int, str, int, int, int, int]


def token_counter() -> tuple[Callable[[str], int], str]:
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("o200k_base")
        return (lambda text: len(encoding.encode(text))), "tiktoken o200k_base"
    except Exception:  # not installed, or its encoding file cannot be fetched offline
        return (lambda text: (len(text) + 3) // 4), "approximation: characters / 4"


def tooling_section(request: dict[str, Any]) -> str:
    system = request["messages"][0]["content"]
    start = system.index("## Tooling")
    end = system.find("\n## ", start + 1)
    return system[start : end if end > 0 else None]


@contextmanager
def mcp_config(count: int) -> Iterator[dict[str, str]]:
    """The stack's env for a stdio MCP server `gen` with `count` tools (its file outside the
    workspace, as the connectors service requires)."""
    folder = Path(tempfile.mkdtemp(prefix="crayfish-bench-mcp-"))
    server = {
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_tools", "--count", str(count)],
        "cwd": str(ROOT),
    }
    (folder / "mcp.json").write_text(json.dumps({"mcpServers": {"gen": server}}))
    try:
        yield {"CONNECTORS_MCP_CONFIG": str(folder / "mcp.json")}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def tool_service(count: int) -> Iterator[dict[str, str]]:
    """The stack's env for the stand-in gRPC tool service `gen` with `count` tools."""
    port = free_port()
    module = ["-m", "tests.fakes.generated_tools", "--count", str(count), "--port", str(port)]
    process = subprocess.Popen([sys.executable, *module], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not check(f"127.0.0.1:{port}", timeout=0.5):
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit("the generated tool service did not start")
            time.sleep(0.1)
        yield {"CRAYFISH_TOOL_SERVICES": f"gen=127.0.0.1:{port}"}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait()


def wait_listed(api: httpx.Client, source: str, count: int, timeout: float = 60) -> None:
    """Until /api/tools lists all `count` extra tools (offered or deferred)."""
    deadline = time.monotonic() + timeout
    while True:
        tools = api.get("/api/tools").json()["tools"]
        if source == "mcp":
            listed = sum(t["name"].startswith("mcp_gen_") for t in tools)
        else:
            listed = sum(t["service"] == "gen" for t in tools)
        if listed == count:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"{listed} of {count} {source} tools listed after {timeout} s")
        time.sleep(0.2)


def measure(
    fake: FakeLLM, source: str, count: int, threshold: int, extra: dict[str, str]
) -> list[dict[str, Any]]:
    """The requests of one turn (two with search: before and after a tool_search)."""
    env = {
        "CRAYFISH_TOOL_SEARCH_THRESHOLD": str(threshold),
        "CRAYFISH_AUTO_RECALL": "false",
        "CRAYFISH_LOG_LEVEL": "WARNING",
        **extra,
    }
    searching = threshold and count > threshold
    with running_stack(fake.base_url, env=env) as stack, httpx.Client(base_url=stack.url) as api:
        wait_listed(api, source, count)
        seen = len(fake.requests)
        if searching:
            fake.reply_tool_calls(("tool_search", {"query": "calendar events"}))
        fake.reply_text("done")
        task = wait_task(api, api.post("/api/chat", json={"message": "go"}).json()["task_id"])
        if task["status"] != "completed":
            raise SystemExit(f"turn failed: {task}")
        return fake.requests[seen:]


def rows_of(
    count: int, mode: str, requests: list[dict[str, Any]], count_tokens: Callable[[str], int]
) -> list[Row]:
    rows = []
    for label, request in zip(("", " +1 search"), requests, strict=False):
        tools = json.dumps(request.get("tools") or [])
        offered = len(request.get("tools") or [])
        section = count_tokens(tooling_section(request))
        rows.append((count, mode + label, offered, len(tools), count_tokens(tools), section))
    return rows


def measure_source(
    fake: FakeLLM, source: str, count_tokens: Callable[[str], int], baseline: list[Row]
) -> list[Row]:
    rows = list(baseline)
    for count in COUNTS:
        if not count and baseline:
            continue
        for mode, threshold in MODES:
            if not count:
                requests = measure(fake, source, 0, threshold, {})
            else:
                with (mcp_config if source == "mcp" else tool_service)(count) as extra:
                    requests = measure(fake, source, count, threshold, extra)
            rows += rows_of(count, mode, requests, count_tokens)
    return rows


def report(title: str, rows: list[Row]) -> None:
    print(f"\n{title}")
    print(
        f"{'extra':>5} {'mode':16} {'tools':>5} {'chars':>7} {'tools tok':>9} {'Tooling tok':>11}"
    )
    for count, mode, offered, chars, tokens, section in rows:
        print(f"{count:5d} {mode:16} {offered:5d} {chars:7d} {tokens:9d} {section:11d}")
    baseline = rows[0][4] + rows[0][5]
    for count, mode, _, _, tokens, section in rows:
        ratio = (tokens + section) / baseline
        print(f"ratio {count:3d} extra, {mode:16}: {ratio:5.2f}x built-in only")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=("both", "mcp"), default="both")
    args = parser.parse_args()
    count_tokens, method = token_counter()
    with FakeLLM() as fake:
        mcp = measure_source(fake, "mcp", count_tokens, [])
        baseline = [row for row in mcp if row[0] == 0]
        service = (
            [] if args.source == "mcp" else measure_source(fake, "service", count_tokens, baseline)
        )
    print(f"tool-schema tokens per request ({method}); built-in tools included")
    report("MCP tools (mcp SDK server over stdio, through connectors)", mcp)
    if service:
        report("stand-in: the same tools from a custom gRPC tool service", service)
    return 0


if __name__ == "__main__":
    sys.exit(main())
