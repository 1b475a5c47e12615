"""Memory footprint of the four services: resident memory after indexing notes and after many chat
turns, and its growth over the second half of the turns. The orchestrator keeps the last 1,000
tasks and 10,000 global events, so past ~1,000 turns growth would be a leak (default 2,400 turns).

Resident memory is the sum of VmRSS over a service's process group (the service and anything it
started). Baseline measured in the same run: a bare `python -c` interpreter's VmRSS; each figure is
also printed as a multiple of it. `--turns 2400 --notes 200` are the defaults (~10 min).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.fakes import FakeLLM
from tests.stacks import running_stack, wait_task

MIB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def group_rss(pgid: int) -> int:
    """VmRSS summed over every process of a process group."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) == pgid:
                total += rss_bytes(int(entry.name))
        except (ProcessLookupError, PermissionError):
            continue
    return total


def bare_interpreter_rss() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        time.sleep(1.0)
        return rss_bytes(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def snapshot(stack) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {name: group_rss(proc.pid) for name, proc in stack.processes.items()}


def notes(count: int) -> dict[str, str]:
    files = {}
    for i in range(count):
        lines = [f"# Notes {i}", ""]
        lines += [
            f"- {day}: met person {i}-{day} about project {i % 17} and decided on option {day % 5}."
            for day in range(1, 13)
        ]
        files[f"memory/2026-01-{i:04d}.md"] = "\n".join(lines) + "\n"
    return files


def wait_indexed(api: httpx.Client) -> float:
    """Seconds until the memory index holds every note (a sync answers once it is current)."""
    started = time.monotonic()
    reply = api.post("/api/memory/sync", timeout=900)
    if reply.status_code != 200:
        raise SystemExit(f"memory sync failed: {reply.status_code} {reply.text}")
    return time.monotonic() - started


def chat_turns(api: httpx.Client, fake: FakeLLM, turns: int, sessions: int, first: int = 0) -> None:
    """`turns` turns spread over `sessions` sessions (0: a new session for every turn)."""
    for i in range(first, first + turns):
        session = f"s{i % sessions}" if sessions else f"turn-{i}"
        fake.reply_tool_calls(("exec", {"command": f"echo turn-{i}"}))
        fake.reply_text(f"done {i} " + "words " * 50)
        task = api.post("/api/chat", json={"message": f"turn {i}", "session_id": session})
        final = wait_task(api, task.json()["task_id"], poll=0.005)
        if final["status"] != "completed":
            raise SystemExit(f"turn {i} failed: {final}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=2400)
    parser.add_argument("--notes", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=10, help="0: a new session every turn")
    args = parser.parse_args()
    baseline = bare_interpreter_rss()
    files = notes(args.notes)
    with FakeLLM() as fake:
        started = time.monotonic()
        with running_stack(fake.base_url, files) as stack:
            healthy_s = time.monotonic() - started
            with httpx.Client(base_url=stack.url, timeout=60) as api:
                index_s = wait_indexed(api)
                idle = snapshot(stack)
                half = args.turns // 2
                chat_turns(api, fake, half, args.sessions)
                early = snapshot(stack)
                chat_turns(api, fake, args.turns - half, args.sessions, first=half)
                late = snapshot(stack)
    print(f"bare python interpreter: {baseline / MIB:.1f} MiB (baseline)")
    print(f"stack healthy after {healthy_s:.1f} s; {args.notes} notes indexed in {index_s:.1f} s")
    header = f"{'service':14} {'indexed MiB':>12} {'x base':>7} {'turns':>6}"
    print(f"{header} {'after MiB':>10} {'x base':>7} {'growth MiB':>11}")
    n_early, n_late = args.turns // 2, args.turns
    for name in idle:
        print(
            f"{name:14} {idle[name] / MIB:>12.1f} {idle[name] / baseline:>7.1f} {n_late:>6} "
            f"{late[name] / MIB:>10.1f} {late[name] / baseline:>7.1f} "
            f"{(late[name] - early[name]) / MIB:>11.1f}"
        )
    print(f"(growth = resident memory after {n_late} turns minus after {n_early} turns)")
    total = sum(late.values())
    print(f"total after {n_late} turns: {total / MIB:.1f} MiB ({total / baseline:.1f}x base)")


if __name__ == "__main__":
    main()
