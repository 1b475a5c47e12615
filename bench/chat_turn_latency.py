"""Latency of one fake-LLM chat turn with one `exec` call, through all four real services.

Prints median and p95 over 20 turns, next to two baselines measured in the same run:
a turn with no tool call, and a bare `exec echo hi` RunTool RPC to the tool-runner.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import grpc
import httpx
from crayfish.common.v1 import tools_pb2
from crayfish.tool_runner.v1 import tool_runner_pb2_grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from figures import percentile

from tests.fakes import FakeLLM
from tests.stacks import running_stack, wait_task

TURNS = 20


def run_turn(api: httpx.Client) -> float:
    started = time.perf_counter()
    task_id = api.post("/api/chat", json={"message": "go", "session_id": "bench"}).json()["task_id"]
    status = wait_task(api, task_id, poll=0.002)
    if status["status"] != "completed":
        raise SystemExit(f"turn failed: {status}")
    return (time.perf_counter() - started) * 1000


def measure(api: httpx.Client, fake: FakeLLM, with_tool: bool) -> list[float]:
    timings = []
    for _ in range(TURNS + 2):
        if with_tool:
            fake.reply_tool_calls(("exec", {"command": "echo hi"}))
        fake.reply_text("done")
        timings.append(run_turn(api))
    return timings[2:]  # the first turns warm caches


def bare_exec(address: str) -> list[float]:
    with grpc.insecure_channel(address) as channel:
        stub = tool_runner_pb2_grpc.ToolRunnerServiceStub(channel)
        request = tools_pb2.RunToolRequest(
            name="exec", arguments_json=json.dumps({"command": "echo hi"})
        )
        timings = []
        for _ in range(TURNS + 2):
            started = time.perf_counter()
            stub.RunTool(request, timeout=30)
            timings.append((time.perf_counter() - started) * 1000)
    return timings[2:]


def main() -> int:
    with (
        FakeLLM() as fake,
        running_stack(
            fake.base_url,
            env={
                "CRAYFISH_MODEL": "fake",
                "CRAYFISH_AUTO_RECALL": "false",
                "CRAYFISH_LOG_LEVEL": "WARNING",
            },
        ) as stack,
    ):
        with httpx.Client(base_url=stack.url, timeout=60) as api:
            no_tool = measure(api, fake, with_tool=False)
            one_exec = measure(api, fake, with_tool=True)
        rpc = bare_exec(stack.address("tool-runner"))
    rows = [
        ("turn, 1 exec call", one_exec),
        ("turn, no tool (baseline)", no_tool),
        ("bare exec RunTool RPC", rpc),
    ]
    print(f"chat turn latency, fake LLM, {TURNS} turns each")
    print(f"{'what':28} {'median ms':>10} {'p95 ms':>10}")
    for name, values in rows:
        print(f"{name:28} {statistics.median(values):10.1f} {percentile(values, 0.95):10.1f}")
    step = statistics.median(one_exec) - statistics.median(no_tool)
    print(f"tool step (turn with exec minus turn without): {step:.1f} ms median")
    ratio = statistics.median(one_exec) / statistics.median(no_tool)
    print(f"ratio turn-with-exec / turn-without: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
