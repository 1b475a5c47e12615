"""Tool-schema tokens per LLM request with 0, 20 and 150 extra tools, with and without tool search.

The extra tools come from a real tool service (tests/fakes/generated_tools.py: MCP-like tools with
a few documented parameters each) added with CRAYFISH_TOOL_SERVICES to a whole stack; the figures
are read from the requests the orchestrator actually sends to the fake LLM: the `tools` array and
the system prompt's Tooling section. "search" is CRAYFISH_TOOL_SEARCH_THRESHOLD=40, "all" is 0
(every schema always). With search, a second figure is the request after one tool_search found 6
tools.

Tokens: tiktoken's o200k_base when tiktoken and its encoding file are available offline; otherwise
an approximation, characters / 4 (OpenAI's rule of thumb for English; JSON schemas tokenize a
little denser, so the true counts are somewhat higher, the ratios about the same). The script
says which it used.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from crayfish_common.healthcheck import check

from devstack.launcher import free_port
from tests.fakes import FakeLLM
from tests.stacks import running_stack, wait_task

COUNTS = (0, 20, 150)


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


def start_generated(count: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.fakes.generated_tools",
            "--count",
            str(count),
            "--port",
            str(port),
        ],
        start_new_session=True,
    )
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not check(address, timeout=0.5):
        if time.monotonic() > deadline or process.poll() is not None:
            raise SystemExit("the generated tool service did not start")
        time.sleep(0.1)
    return process, address


def measure(fake: FakeLLM, count: int, threshold: int, address: str) -> list[dict[str, Any]]:
    """The requests of one turn (two with search: before and after a tool_search)."""
    env = {
        "CRAYFISH_TOOL_SEARCH_THRESHOLD": str(threshold),
        "CRAYFISH_AUTO_RECALL": "false",
        "CRAYFISH_LOG_LEVEL": "WARNING",
    }
    if count:
        env["CRAYFISH_TOOL_SERVICES"] = f"gen={address}"
    searching = threshold and count > threshold
    with running_stack(fake.base_url, env=env) as stack, httpx.Client(base_url=stack.url) as api:
        seen = len(fake.requests)
        if searching:
            fake.reply_tool_calls(("tool_search", {"query": "calendar events"}))
        fake.reply_text("done")
        task = wait_task(api, api.post("/api/chat", json={"message": "go"}).json()["task_id"])
        if task["status"] != "completed":
            raise SystemExit(f"turn failed: {task}")
        return fake.requests[seen:]


def main() -> int:
    count_tokens, method = token_counter()
    services = {count: start_generated(count) for count in COUNTS if count}
    rows = []
    try:
        with FakeLLM() as fake:
            for count in COUNTS:
                address = services[count][1] if count else ""
                for mode, threshold in (("all", 0), ("search", 40)):
                    requests = measure(fake, count, threshold, address)
                    for label, request in zip(("", " +1 search"), requests, strict=False):
                        tools = json.dumps(request.get("tools") or [])
                        rows.append(
                            (
                                count,
                                mode + label,
                                len(request.get("tools") or []),
                                len(tools),
                                count_tokens(tools),
                                count_tokens(tooling_section(request)),
                            )
                        )
    finally:
        for process, _ in services.values():
            os.killpg(process.pid, signal.SIGTERM)
            process.wait()
    print(f"tool-schema tokens per request ({method}); built-in tools included")
    header = (
        f"{'extra':>5} {'mode':16} {'tools':>5} {'chars':>7} {'tools tok':>9} {'Tooling tok':>11}"
    )
    print(header)
    for count, mode, offered, chars, tokens, section in rows:
        print(f"{count:5d} {mode:16} {offered:5d} {chars:7d} {tokens:9d} {section:11d}")
    baseline = rows[0][4] + rows[0][5]
    for count, mode, _, _, tokens, section in rows:
        ratio = (tokens + section) / baseline
        print(f"ratio {count:3d} extra, {mode:16}: {ratio:5.2f}x built-in only")
    return 0


if __name__ == "__main__":
    sys.exit(main())
