"""Turns per second with 1, 2 and 3 orchestrator replicas on one PostgreSQL (issue 14).

SESSIONS sessions send one turn each at once, spread over the replicas; every turn makes two
requests to the fake LLM (one asking for `exec echo <n>`, one for the answer), each answered after
LLM_DELAY seconds, so a turn's LLM-bound ideal is 2 x LLM_DELAY and the whole burst's ideal wall
time is that too. Completion is read from the tasks table (no polling load on the replicas).
Prints, per replica count: wall time, turns/s, efficiency (ideal / wall), p50/p95 turn latency,
and CPU seconds per turn of the orchestrators and of the tool-runners. All replicas share this
machine's cores, so extra replicas add no CPU: what they change is how work is spread.

    .venv/bin/python bench/replica_throughput.py [--sessions 200] [--replicas 1,2,3]
        [--tool-runners 1] [--llm-delay 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from figures import percentile

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, Reply
from tests.stacks import running_stack

TERMINAL = ("completed", "failed", "cancelled", "interrupted")


def scripted(fake: FakeLLM, delay: float) -> Any:
    def reply(body: dict[str, Any]) -> Reply:
        if body["messages"][-1]["role"] == "user":
            n = body["messages"][-1]["content"].split()[-1]
            return Reply(tool_calls=[fake.tool_call("exec", {"command": f"echo {n}"})], delay=delay)
        return Reply(text="done", delay=delay)

    return reply


def cpu_seconds(stack: LocalStack, names: list[str]) -> float:
    """User + system CPU of the named services' processes and their children so far."""
    total = 0.0
    for name in names:
        try:
            proc = psutil.Process(stack.processes[name].pid)
            for p in [proc, *proc.children(recursive=True)]:
                times = p.cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
        except psutil.NoSuchProcess:
            continue
    return total


async def burst(
    stack: LocalStack, sessions: int, tag: str
) -> tuple[float, list[float], list[float]]:
    """Sends one turn per session at once; (wall seconds, per-turn latencies, per-turn waits in
    the queue) once all have ended."""
    assert stack.database_url is not None
    started = time.perf_counter()
    limits = httpx.Limits(max_connections=sessions, max_keepalive_connections=sessions)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def send(k: int) -> str:
            url = stack.urls[k % len(stack.urls)]
            body = {"message": f"{tag} turn {k}", "session_id": f"{tag}-{k}"}
            reply = await client.post(f"{url}/api/chat", json=body)
            reply.raise_for_status()
            return str(reply.json()["task_id"])

        ids = await asyncio.gather(*(send(k) for k in range(sessions)))
    async with await psycopg.AsyncConnection.connect(stack.database_url) as conn:
        while True:
            rows = await (
                await conn.execute(
                    "SELECT status, finished_at - created_at, started_at - created_at FROM tasks"
                    " WHERE id = ANY(%s)",
                    (ids,),
                )
            ).fetchall()
            if len(rows) == sessions and all(r[0] in TERMINAL for r in rows):
                break
            await asyncio.sleep(0.05)
    wall = time.perf_counter() - started
    failed = [r[0] for r in rows if r[0] != "completed"]
    if failed:
        raise SystemExit(f"{len(failed)} turns did not complete: {sorted(set(failed))}")
    return wall, [float(r[1]) for r in rows], [float(r[2]) for r in rows]


def measure(fake: FakeLLM, replicas: int, args: argparse.Namespace) -> dict[str, float]:
    env = {"CRAYFISH_AUTO_RECALL": "false", "CRAYFISH_LOG_LEVEL": "WARNING"}
    with running_stack(
        fake.base_url, env=env, orchestrators=replicas, tool_runners=args.tool_runners
    ) as stack:
        asyncio.run(burst(stack, 10, "warm"))  # connections, pools, first-call caches
        orchestrators, runners = stack.orchestrator_names, stack.tool_runner_names
        cpu_before = cpu_seconds(stack, orchestrators), cpu_seconds(stack, runners)
        wall, latencies, waits = asyncio.run(burst(stack, args.sessions, "bench"))
        cpu_after = cpu_seconds(stack, orchestrators), cpu_seconds(stack, runners)
    ideal = 2 * args.llm_delay
    return {
        "wall": wall,
        "turns/s": args.sessions / wall,
        "efficiency": ideal / wall,
        "p50": percentile(latencies, 0.5),
        "p95": percentile(latencies, 0.95),
        "wait50": percentile(waits, 0.5),
        "orch_cpu_ms": (cpu_after[0] - cpu_before[0]) / args.sessions * 1000,
        "runner_cpu_ms": (cpu_after[1] - cpu_before[1]) / args.sessions * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--replicas", default="1,2,3")
    parser.add_argument("--tool-runners", type=int, default=1)
    parser.add_argument("--llm-delay", type=float, default=0.5)
    args = parser.parse_args()
    counts = [int(n) for n in args.replicas.split(",")]
    results = {}
    with FakeLLM() as fake:
        fake.reply_forever_with(scripted(fake, args.llm_delay))
        for n in counts:
            results[n] = measure(fake, n, args)
    base = results[counts[0]]
    print(
        f"{args.sessions} sessions x 1 turn (2 LLM requests of {args.llm_delay}s, one exec), "
        f"{args.tool_runners} tool-runner(s), auto-recall off; ideal wall {2 * args.llm_delay:.1f}s"
    )
    print(
        f"{'orchestrators':>13} {'wall s':>7} {'turns/s':>8} {'vs 1':>5} {'effic.':>6} "
        f"{'p50 s':>6} {'p95 s':>6} {'queued p50 s':>12} {'orch CPU ms/turn':>17} "
        f"{'runner CPU ms/turn':>19}"
    )
    for n, r in results.items():
        print(
            f"{n:>13} {r['wall']:>7.2f} {r['turns/s']:>8.1f} "
            f"{r['turns/s'] / base['turns/s']:>5.2f} "
            f"{r['efficiency']:>6.2f} {r['p50']:>6.2f} {r['p95']:>6.2f} {r['wait50']:>12.2f} "
            f"{r['orch_cpu_ms']:>17.1f} "
            f"{r['runner_cpu_ms']:>19.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
