"""One reply with many memory-hungry `exec` calls: how many sandboxes run at once, and the
machine's memory meanwhile.

The fake LLM answers one message with N `exec` calls; each command marks its start and end in a
file, holds M MiB (python3, bytes touched) for H seconds and prints its number (identical results
would end the turn as a loop). Sampled every 0.1 s while the turn runs: the machine's used memory
(MemTotal - MemAvailable, so other work on the machine shows too) and the resident memory of the
tool-runner's process tree (its sandboxes included).
Printed: the most commands at once (from the marks), every call's exit code, the wall time, the
baseline and peak of both memory figures, and the command processes left afterwards.

Run: .venv/bin/python bench/parallel_exec_memory.py [--calls 40] [--mib 700] [--hold 2]
     [--per-session 4] [--max-running 8] [--total-memory-mb 0]
(--per-session 40 --max-running 40 shows the unbounded behaviour of earlier versions; keep
calls x MiB well under the machine's free memory then.)
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from process_memory import tree_rss_mib

from tests.fakes import FakeLLM
from tests.stacks import running_stack, wait_task

# The sleep length marks the command's processes on the host.
HOLD = (
    "date +%s%N > marks/{n}.start;"
    " python3 -c \"import time; b = b'x' * ({mib} << 20); time.sleep({hold}); 0.0523\";"
    " code=$?; date +%s%N > marks/{n}.end; echo call-{n}; exit $code"
)


def used_mib() -> float:
    info = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, value = line.split(":", 1)
        info[key] = int(value.split()[0])
    return (info["MemTotal"] - info["MemAvailable"]) / 1024


def most_at_once(marks: Path) -> int:
    events = []
    for start in marks.glob("*.start"):
        end = start.with_suffix(".end")
        events.append((int(start.read_text()), 1))
        events.append((int(end.read_text()) if end.exists() else 2**63, -1))
    running = peak = 0
    for _, step in sorted(events):
        running += step
        peak = max(peak, running)
    return peak


def command_processes() -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"0.0523" in (entry / "cmdline").read_bytes():
                count += 1
        except OSError:
            continue
    return count


class Sampler(threading.Thread):
    def __init__(self, runner_pid: int):
        super().__init__(daemon=True)
        self.runner_pid = runner_pid
        self.stop = threading.Event()
        self.used: list[float] = []
        self.runner: list[float] = []

    def run(self) -> None:
        while not self.stop.is_set():
            self.used.append(used_mib())
            self.runner.append(tree_rss_mib(self.runner_pid))
            self.stop.wait(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--mib", type=int, default=700)
    parser.add_argument("--hold", type=float, default=2.0)
    parser.add_argument("--per-session", type=int, default=4)
    parser.add_argument("--max-running", type=int, default=8)
    parser.add_argument("--total-memory-mb", type=int, default=0)
    args = parser.parse_args()
    env = {
        "TOOL_RUNNER_MAX_RUNNING_PER_SESSION": str(args.per_session),
        "TOOL_RUNNER_MAX_RUNNING": str(args.max_running),
        "TOOL_RUNNER_TOTAL_MEMORY_MB": str(args.total_memory_mb),
        "CRAYFISH_TOOL_TIMEOUT": "600",
    }
    with FakeLLM() as fake_llm, running_stack(fake_llm.base_url, env=env) as stack:
        import httpx

        marks = stack.workspace / "marks"
        marks.mkdir()
        marks.chmod(0o777)
        runner_pid = stack.processes["tool-runner"].pid
        calls: list[tuple[str, dict[str, Any] | str]] = [
            ("exec", {"command": HOLD.format(n=n, mib=args.mib, hold=args.hold), "timeout": 600})
            for n in range(args.calls)
        ]
        fake_llm.reply_tool_calls(*calls)
        fake_llm.reply_text("done")
        baseline_used, baseline_runner = used_mib(), tree_rss_mib(runner_pid)
        sampler = Sampler(runner_pid)
        with httpx.Client(base_url=stack.url, timeout=60) as api:
            sampler.start()
            started = time.monotonic()
            accepted = api.post("/api/chat", json={"message": "go", "session_id": "bench"})
            task = wait_task(api, accepted.json()["task_id"], timeout=1200)
            elapsed = time.monotonic() - started
            sampler.stop.set()
            sampler.join()
        time.sleep(0.5)
        left = command_processes()
        outputs = max(
            (
                [m["content"] for m in r["messages"] if m["role"] == "tool"]
                for r in fake_llm.requests
            ),
            key=len,
        )
        codes = [o.split("\n", 1)[0].removeprefix("exit code: ") for o in outputs]
        print(
            f"{args.calls} exec x {args.mib} MiB for {args.hold:g} s; bounds: "
            f"{args.per_session}/session, {args.max_running}/runner, total memory "
            f"{args.total_memory_mb or 'auto'} MiB"
        )
        print(
            f"turn: {task['status']} in {elapsed:.1f} s; most commands at once: "
            f"{most_at_once(marks)}"
        )
        print(f"exit codes: {sorted(set(codes))} ({codes.count('0')} of {len(codes)} are 0)")
        print(
            f"machine used memory: baseline {baseline_used:.0f} MiB, peak "
            f"{max(sampler.used):.0f} MiB (+{max(sampler.used) - baseline_used:.0f})"
        )
        print(
            f"tool-runner tree RSS: baseline {baseline_runner:.0f} MiB, peak "
            f"{max(sampler.runner):.0f} MiB"
        )
        print(f"command processes left afterwards: {left}")


if __name__ == "__main__":
    main()
