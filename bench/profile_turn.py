"""Where the orchestrator's time goes in a turn: its CPU per no-tool turn and per tool turn, and
a pyinstrument profile of each (the orchestrator in this process, the other services real).

The tool-runner, memory and skills run as processes (devstack); one OrchestratorCore runs here,
on its own fresh database, so the profiler sees only its code. Prints the CPU time of this
process per turn (the fake LLM's server threads are subtracted: they run here too) and the
profile's slowest frames.

Run: .venv/bin/python bench/profile_turn.py [--turns 40] [--html DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import statistics
import sys
import threading
import time
from pathlib import Path

from pyinstrument import Profiler

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestrator.config import Settings
from orchestrator.core import OrchestratorCore

from tests.fakes import FakeLLM
from tests.postgres import fresh_database
from tests.stacks import running_stack


def thread_cpu() -> dict[int, float]:
    """CPU seconds of each thread of this process (Linux: /proc/self/turn)."""
    ticks = os.sysconf("SC_CLK_TCK")
    found = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            text = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        found[int(tid)] = (int(fields[11]) + int(fields[12])) / ticks
    return found


def own_cpu(before: dict[int, float], after: dict[int, float], exclude: set[int]) -> float:
    return sum(v - before.get(t, 0.0) for t, v in after.items() if t not in exclude)


async def turns(core: OrchestratorCore, fake: FakeLLM, count: int, tool: bool) -> list[float]:
    walls = []
    for i in range(count):
        if tool:
            fake.reply_tool_calls(("exec", {"command": "echo hi"}))
        fake.reply_text("Hello, this is the answer in a few words.")
        started = time.perf_counter()
        turn = await core.submit(f"profile-{tool}", f"turn {i}")
        turn = await core.turns.wait(turn.id, within=60)
        if turn.status != "completed":
            raise SystemExit(f"turn failed: {turn.error}")
        walls.append((time.perf_counter() - started) * 1000)
    return walls


async def measure(
    core: OrchestratorCore, fake: FakeLLM, count: int, tool: bool, html: Path | None
) -> tuple[float, float]:
    await turns(core, fake, 3, tool)  # warm
    fake_threads = {t.native_id for t in threading.enumerate() if t.name.startswith("fake")}
    fake_threads |= {t.native_id for t in threading.enumerate() if "Thread-" in t.name}
    before = thread_cpu()
    plain_walls = await turns(core, fake, count, tool)  # CPU measured without a profiler
    after = thread_cpu()
    profiler = Profiler(async_mode="disabled", interval=0.001)
    cprofile = cProfile.Profile()
    profiler.start()
    cprofile.enable()
    await turns(core, fake, count, tool)
    cprofile.disable()
    profiler.stop()
    walls = plain_walls
    # The fake LLM serves from threads of this process: leave them out (handler threads
    # are short-lived, so also leave out every thread that did not exist before).
    exclude = fake_threads | {t for t in after if t not in before}
    cpu_ms = own_cpu(before, after, exclude) / count * 1000
    name = "one exec" if tool else "no tool"
    print(
        f"\n=== turn with {name}: wall {statistics.median(walls):.1f} ms median, "
        f"orchestrator CPU {cpu_ms:.1f} ms per turn"
    )
    print(profiler.output_text(unicode=False, color=False, show_all=False)[:4000])
    if os.environ.get("BENCH_PSTATS"):
        cprofile.dump_stats(f"{os.environ['BENCH_PSTATS']}-{'exec' if tool else 'plain'}.pstats")
    print(f"--- cProfile, top functions by own time ({count} turns) ---")
    out = io.StringIO()
    pstats.Stats(cprofile, stream=out).sort_stats("tottime").print_stats(25)
    print(out.getvalue()[-5000:])
    if html is not None:
        html.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (a bench, after timing)
        (html / f"turn-{'exec' if tool else 'plain'}.html").write_text(profiler.output_html())
    return statistics.median(walls), cpu_ms


async def run(stack_env: dict[str, str], llm: FakeLLM, count: int, html: Path | None) -> None:
    with running_stack(llm.base_url, env=stack_env) as stack:
        values = {
            **stack.service_env(),
            "CRAYFISH_DATABASE_URL": fresh_database(),
            "CRAYFISH_DATA_DIR": str(stack.data_dir / "profiled"),
            **stack_env,
        }
        os.environ.update(values)
        core = OrchestratorCore(Settings())
        await core.start()
        try:
            await measure(core, llm, count, tool=False, html=html)
            await measure(core, llm, count, tool=True, html=html)
        finally:
            await core.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--recall", action="store_true", help="auto-recall on (default off)")
    parser.add_argument("--html", type=Path, default=None)
    args = parser.parse_args()
    env = {
        "CRAYFISH_LOG_LEVEL": "WARNING",
        "CRAYFISH_AUTO_RECALL": "true" if args.recall else "false",
        "CRAYFISH_MODEL": "fake-model",
    }
    with FakeLLM() as fake:
        asyncio.run(run(env, fake, args.turns, args.html))
    return 0


if __name__ == "__main__":
    sys.exit(main())
