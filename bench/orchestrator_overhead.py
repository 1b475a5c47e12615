"""Orchestrator overhead per tool round: task time minus LLM time minus tool time.

Runs the real stack with the fake LLM; each round asks for one `exec echo round N`. Prints median
and p95 of the overhead per round for 1, 3 and 10 rounds, then 4 calls (`sleep 0.2`) in one
round (run concurrently) against the same 4 calls over 4 rounds (sequential).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from figures import percentile

from tests.fakes import FakeLLM
from tests.stacks import running_stack

REPEATS = 12


def run_task(api: httpx.Client) -> list[dict[str, Any]]:
    task_id = api.post("/api/chat", json={"message": "go"}).json()["task_id"]
    events = []
    with api.stream("GET", f"/api/tasks/{task_id}/events") as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line.removeprefix("data: ")))
    if events[-1]["type"] != "task.completed":
        raise SystemExit(f"task failed: {events[-1]}")
    return events


def split_time(events: list[dict[str, Any]]) -> tuple[float, float, float]:
    """(total, llm, tools) in ms; tools of one round count as their wall-clock span."""
    started = next(e["ts"] for e in events if e["type"] == "task.started")
    total = (events[-1]["ts"] - started) * 1000
    llm = sum(e["duration_ms"] for e in events if e["type"] == "llm.response")
    tools = 0.0
    spans: dict[int, list[float]] = {}
    round_no = 0
    for event in events:
        if event["type"] == "llm.request":
            round_no = event["round"]
        if event["type"] in ("tool.started", "tool.finished"):
            spans.setdefault(round_no, []).append(event["ts"])
    for stamps in spans.values():
        tools += (max(stamps) - min(stamps)) * 1000
    return total, llm, tools


def overhead_per_round(api: httpx.Client, fake: FakeLLM, rounds: int) -> list[float]:
    values = []
    for _ in range(REPEATS):
        for i in range(rounds):
            fake.reply_tool_calls(("exec", {"command": f"echo round {i}"}))
        fake.reply_text("done")
        total, llm, tools = split_time(run_task(api))
        values.append((total - llm - tools) / (rounds + 1))
    return values


def wall(api: httpx.Client, fake: FakeLLM, parallel: bool) -> list[float]:
    values = []
    calls = [("exec", {"command": f"sleep 0.2; echo {i}"}) for i in range(4)]
    for _ in range(5):
        if parallel:
            fake.reply_tool_calls(*calls)
        else:
            for call in calls:
                fake.reply_tool_calls(call)
        fake.reply_text("done")
        values.append(split_time(run_task(api))[0])
    return values


def main() -> int:
    with (
        FakeLLM() as fake,
        running_stack(
            fake.base_url,
            env={
                "CRAYFISH_AUTO_RECALL": "false",
                "CRAYFISH_LOG_LEVEL": "WARNING",
                "CRAYFISH_REPEAT_LIMIT": "100",
            },
        ) as stack,
    ):
        with httpx.Client(base_url=stack.url, timeout=120) as api:
            overhead_per_round(api, fake, 1)  # warm-up
            rows = [(n, overhead_per_round(api, fake, n)) for n in (1, 3, 10)]
            parallel = wall(api, fake, parallel=True)
            sequential = wall(api, fake, parallel=False)
    print("orchestrator overhead per LLM round (task time - LLM time - tool time)")
    print(f"{'tool rounds':>12} {'median ms':>10} {'p95 ms':>8}")
    for rounds, values in rows:
        median, p95 = statistics.median(values), percentile(values, 0.95)
        print(f"{rounds:>12} {median:10.2f} {p95:8.2f}")
    par, seq = statistics.median(parallel), statistics.median(sequential)
    print(f"4 x `sleep 0.2`: one round (concurrent) {par:.0f} ms, four rounds {seq:.0f} ms")
    print(f"ratio sequential / concurrent: {seq / par:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
