"""Crayfish (all four services, bwrap sandbox, PostgreSQL) against nanobot 0.3.5 (`nanobot serve`,
in-process and unsandboxed) on ONE scripted OpenAI-compatible LLM, in one run.

Both are driven through their OpenAI-compatible APIs (`POST /v1/chat/completions`), turn for turn,
alternating, so noise on a shared machine hits both. Printed, median and p95 of:
- tool step: from the LLM request that asks for `exec echo hi` to the next request, which carries
  its result (measured at the fake LLM: the agent's own time between two requests);
- warm turn: a whole turn at the client, with one `exec` and with no tool (non-streamed);
- first streamed byte: from sending a streamed request to its first content delta;
- resident memory after the run (Crayfish: its four services; nanobot: its one process).

Run: .venv/bin/python bench/side_by_side.py [--turns 20]. nanobot installs into its own venv
(~/.cache/crayfish-bench/nanobot-venv, or NANOBOT_BENCH_VENV) on first use.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from figures import percentile
from nanobot_side import MODEL, NanobotServer, ensure_venv
from process_memory import group_rss_mib, tree_rss_mib

from devstack.launcher import free_port
from tests.fakes import FakeLLM, Reply, ToolCall
from tests.otlp import OTLPReceiver, ReceivedSpan
from tests.stacks import running_stack

TOOL_ASK = "run echo hi with the exec tool"
PLAIN_ASK = "say hello"
ANSWER = "Hello! This answer comes in a few streamed words, like a real one."


class Script:
    """The fake LLM's behaviour, the same for both: `exec echo hi` when asked, then "done";
    records each tool step (request asking for the call -> request carrying its result)."""

    def __init__(self) -> None:
        self.side = ""
        self.steps: dict[str, list[float]] = {}
        self._asked_at: float | None = None

    def __call__(self, body: dict[str, Any]) -> Reply:
        now = time.perf_counter()
        last = body["messages"][-1]
        if last.get("role") == "tool":
            if self._asked_at is not None:
                self.steps.setdefault(self.side, []).append((now - self._asked_at) * 1000)
                self._asked_at = None
            return Reply(text="done")
        if TOOL_ASK in _text(last.get("content")):
            self._asked_at = now
            return Reply(tool_calls=[ToolCall("exec", json.dumps({"command": "echo hi"}))])
        return Reply(text=ANSWER)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


class Side:
    """One system behind its OpenAI-compatible API."""

    def __init__(self, name: str, url: str, body: dict[str, Any], headers: dict[str, str]):
        self.name = name
        self.client = httpx.Client(base_url=url, timeout=120, headers=headers)
        self.body = body
        self.figures: dict[str, list[float]] = {}

    def turn(self, ask: str) -> float:
        started = time.perf_counter()
        response = self.client.post("/v1/chat/completions", json=self._body(ask))
        response.raise_for_status()
        if not response.json()["choices"][0]["message"]["content"]:
            raise SystemExit(f"{self.name}: empty answer: {response.text[:300]}")
        return (time.perf_counter() - started) * 1000

    def first_byte(self, ask: str) -> float:
        started = time.perf_counter()
        first = None
        body = {**self._body(ask), "stream": True}
        with self.client.stream("POST", "/v1/chat/completions", json=body) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if first is None and line.startswith("data: {"):
                    choices = json.loads(line[6:]).get("choices") or [{}]
                    if (choices[0].get("delta") or {}).get("content"):
                        first = (time.perf_counter() - started) * 1000
        if first is None:
            raise SystemExit(f"{self.name}: the stream carried no content")
        return first

    def _body(self, ask: str) -> dict[str, Any]:
        return {**self.body, "messages": [{"role": "user", "content": ask}]}

    def record(self, what: str, value: float) -> None:
        self.figures.setdefault(what, []).append(value)


def alternate(sides: list[Side], turns: int, what: str, run: Callable[[Side], float]) -> None:
    for i in range(turns + 3):  # the first three warm caches and connections
        for side in sides if i % 2 == 0 else reversed(sides):
            value = run(side)
            if i >= 3:
                side.record(what, value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument(
        "--no-breakdown", dest="breakdown", action="store_false", help="skip the traced run"
    )
    args = parser.parse_args()
    nanobot_bin = ensure_venv()
    script = Script()
    with FakeLLM(model=MODEL) as fake:
        fake.reply_forever_with(script)
        env = {"CRAYFISH_MODEL": MODEL, "CRAYFISH_LOG_LEVEL": "WARNING"}
        nanobot = NanobotServer(fake.base_url, free_port())
        try:
            nanobot.start(nanobot_bin)
            with running_stack(fake.base_url, env=env) as stack:
                sides = [
                    Side(
                        "crayfish",
                        stack.url,
                        {"model": "crayfish"},
                        {"x-crayfish-session": "bench-side"},
                    ),
                    Side("nanobot", nanobot.url, {"model": MODEL, "session_id": "bench-side"}, {}),
                ]

                def tool_turn(side: Side) -> float:
                    script.side = side.name
                    return side.turn(TOOL_ASK)

                alternate(sides, args.turns, "warm turn, 1 exec", tool_turn)
                alternate(sides, args.turns, "warm turn, no tool", lambda s: s.turn(PLAIN_ASK))
                alternate(
                    sides, args.turns, "first streamed byte", lambda s: s.first_byte(PLAIN_ASK)
                )
                assert nanobot.process is not None
                memory = {
                    "crayfish": sum(group_rss_mib(p.pid) for p in stack.processes.values()),
                    "crayfish orchestrator": group_rss_mib(stack.processes["orchestrator"].pid),
                    "nanobot": tree_rss_mib(nanobot.process.pid),
                }
        finally:
            nanobot.stop()
    for side in sides:
        side.figures["tool step (at the LLM)"] = script.steps.get(side.name, [])[3:]
    report(sides, memory, args.turns)
    if args.breakdown:
        breakdown(args.turns)
    return 0


def breakdown(turns: int) -> None:
    """A tool turn's parts, from the traces of a second Crayfish stack with tracing on."""
    script = Script()
    with OTLPReceiver() as otlp, FakeLLM(model=MODEL) as fake:
        fake.reply_forever_with(script)
        env = {
            "CRAYFISH_MODEL": MODEL,
            "CRAYFISH_LOG_LEVEL": "WARNING",
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "200",
        }
        with running_stack(fake.base_url, env=env) as stack:
            side = Side("crayfish", stack.url, {"model": "crayfish"}, {"x-crayfish-session": "bd"})
            script.side = "crayfish"
            for _ in range(turns + 3):
                side.turn(TOOL_ASK)
            time.sleep(1.0)  # the last spans are exported
    parts: dict[str, list[float]] = {}
    by_trace: dict[str, list[ReceivedSpan]] = {}
    for span in otlp.spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    for spans in list(by_trace.values())[3:]:
        turn = next((s for s in spans if s.name.startswith("turn chat")), None)
        llm = sorted((s for s in spans if s.name == "llm"), key=lambda s: s.start_ns)
        tool = next((s for s in spans if s.name == "tool exec"), None)
        runner = next((s for s in spans if s.service == "tool-runner"), None)
        setup = next((s for s in spans if s.name == "turn setup"), None)
        if turn is None or len(llm) != 2 or tool is None or runner is None or setup is None:
            continue
        for name, value in [
            ("task start -> 1st LLM request", (llm[0].start_ns - turn.start_ns) / 1e6),
            ("  of which turn setup", setup.duration_ms),
            ("1st LLM request (fake: no delay)", llm[0].duration_ms),
            ("LLM reply -> tool call", (tool.start_ns - llm[0].end_ns) / 1e6),
            ("tool exec, orchestrator side", tool.duration_ms),
            ("  of which in the tool-runner", runner.duration_ms),
            ("tool result -> 2nd LLM request", (llm[1].start_ns - tool.end_ns) / 1e6),
            ("tool step (1st LLM start->2nd)", (llm[1].start_ns - llm[0].start_ns) / 1e6),
        ]:
            parts.setdefault(name, []).append(value)
    print("\nCrayfish tool turn, from its traces (a second stack, tracing on), median ms:")
    for name, values in parts.items():
        print(f"  {name:34} {statistics.median(values):7.1f}")


def report(sides: list[Side], memory: dict[str, float], turns: int) -> None:
    crayfish, nanobot = sides
    print(f"Crayfish vs nanobot 0.3.5, one fake LLM, {turns} turns each, alternating")
    print("(2 cores shared with other engineers' work: compare the ratios, not the ms)")
    print("Crayfish: REST /v1/chat/completions, 4 services over gRPC, bwrap sandbox, PostgreSQL;")
    print("nanobot: `nanobot serve` (its API mode), in-process tools, no sandbox")
    head = f"{'what':26} {'crayfish ms':>12} {'p95':>7} {'nanobot ms':>11} {'p95':>7} {'ratio':>6}"
    print(head)
    for what in crayfish.figures:
        mine, theirs = crayfish.figures[what], nanobot.figures.get(what, [])
        if not mine or not theirs:
            print(f"{what:26} (no samples)")
            continue
        m, t = statistics.median(mine), statistics.median(theirs)
        print(
            f"{what:26} {m:12.1f} {percentile(mine, 0.95):7.1f} {t:11.1f} "
            f"{percentile(theirs, 0.95):7.1f} {m / t:6.2f}"
        )
    print(
        f"{'resident memory MiB':26} {memory['crayfish']:12.0f} {'':7} {memory['nanobot']:11.0f}"
        f" {'':7} {memory['crayfish'] / memory['nanobot']:6.2f}"
    )
    print(
        f"  (Crayfish's orchestrator alone: {memory['crayfish orchestrator']:.0f} MiB; "
        "PostgreSQL not counted)"
    )
    print("ratio = crayfish / nanobot (below 1: Crayfish is faster or smaller)")


if __name__ == "__main__":
    sys.exit(main())
