"""Bounded parallel commands through the real service: past the bound per session or per
tool-runner a call waits (within its timeout, cancellable), and a parent cgroup caps the memory of
all commands together."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from crayfish.common.v1 import tools_pb2

from .conftest import host_processes, is_root, start_runner, stop_runner

# Records its start, holds its slot until the test creates `release`, records its end.
GATED = (
    "date +%s%N > marks/{name}.start;"
    " while [ ! -e release ]; do sleep 0.05; done;"
    " date +%s%N > marks/{name}.end"
)


def gated(name: str) -> str:
    return GATED.format(name=name)


def marks_dir(workspace: Path) -> Path:
    marks = workspace / "marks"
    marks.mkdir()
    marks.chmod(0o777)  # the sandbox uid writes the marks
    return marks


def started(marks: Path, prefix: str = "") -> list[str]:
    return sorted(p.stem for p in marks.glob(f"{prefix}*.start"))


def most_at_once(marks: Path, prefix: str = "") -> int:
    """The most commands (named with prefix) between their start and end marks at one time."""
    events = []
    for start in marks.glob(f"{prefix}*.start"):
        events.append((int(start.read_text()), 1))
        events.append((int(start.with_suffix(".end").read_text()), -1))
    running = peak = 0
    for _, step in sorted(events):  # an end before a start at the same instant
        running += step
        peak = max(peak, running)
    return peak


async def until(check: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)


async def release_after_the_bound_fills(workspace: Path, marks: Path, bound: int) -> None:
    """Waits until `bound` commands hold their slots, gives the others 2 s to start too (as they
    would without a bound), then lets them all go."""
    await until(lambda: len(started(marks)) >= bound)
    deadline = time.monotonic() + 2
    await until(lambda: len(started(marks)) > bound or time.monotonic() > deadline)
    (workspace / "release").touch()


@pytest.fixture
async def bounded(workspace: Path, data_dir: Path):
    service, channel, client = await start_runner(
        workspace, data_dir, max_running=4, max_running_per_session=3
    )
    yield client
    await stop_runner(service, channel, client)


async def test_one_session_never_runs_more_than_its_bound_and_every_call_finishes(
    bounded, workspace
):
    marks = marks_dir(workspace)
    calls = [asyncio.create_task(bounded.sh(gated(f"c{n:02d}"), timeout=120)) for n in range(12)]
    await release_after_the_bound_fills(workspace, marks, 3)
    replies = await asyncio.gather(*calls)
    assert all(r.ok and r.exit_code == 0 for r in replies), [r.output for r in replies]
    assert len(started(marks)) == 12
    assert most_at_once(marks) == 3


async def test_all_sessions_together_never_run_more_than_the_runner_bound(bounded, workspace):
    marks = marks_dir(workspace)
    calls = [
        asyncio.create_task(bounded.run("exec", session=s, command=gated(f"{s}{n}"), timeout=120))
        for s in ("a", "b", "c")
        for n in range(3)
    ]
    await release_after_the_bound_fills(workspace, marks, 4)
    replies = await asyncio.gather(*calls)
    assert all(r.ok and r.exit_code == 0 for r in replies), [r.output for r in replies]
    assert len(started(marks)) == 9
    assert most_at_once(marks) == 4
    assert all(most_at_once(marks, s) <= 3 for s in ("a", "b", "c"))


async def test_a_waiting_call_keeps_its_timeout(bounded, workspace):
    marks = marks_dir(workspace)
    holders = [asyncio.create_task(bounded.sh(gated(f"h{n}"), timeout=120)) for n in range(3)]
    await until(lambda: len(started(marks)) == 3)
    late = await bounded.sh(gated("late"), timeout=1)
    assert not late.ok
    assert "timed out after 1s waiting for a free slot" in late.output
    assert "did not start" in late.output
    (workspace / "release").touch()
    assert all(r.ok for r in await asyncio.gather(*holders))
    assert started(marks) == ["h0", "h1", "h2"]  # the late command never ran


async def test_a_cancelled_waiting_call_never_runs_and_frees_its_place(bounded, workspace):
    marks = marks_dir(workspace)
    holders = [asyncio.create_task(bounded.sh(gated(f"h{n}"), timeout=120)) for n in range(3)]
    await until(lambda: len(started(marks)) == 3)
    request = tools_pb2.RunToolRequest(
        name="exec",
        arguments_json=json.dumps({"command": gated("cancelled"), "timeout": 120}),
        session_id="s1",
    )
    waiting = bounded.stub.RunToolStream(request)
    reading = asyncio.ensure_future(waiting.read())
    await asyncio.sleep(0.5)  # queued behind the three holders
    waiting.cancel()
    await asyncio.gather(reading, return_exceptions=True)
    (workspace / "release").touch()
    assert all(r.ok for r in await asyncio.gather(*holders))
    after = [asyncio.create_task(bounded.sh(gated(f"a{n}"), timeout=30)) for n in range(3)]
    assert all(r.ok for r in await asyncio.gather(*after))  # three slots, none leaked
    assert "cancelled" not in started(marks)


# Holds ~700 MiB until `release` exists; writes marks/<name>.held once it does.
HOLD_MEMORY = (
    "python3 -c \"import os, time; b = b'x' * (700 << 20); open('marks/{name}.held', 'w');"
    " [time.sleep(0.05) for _ in iter(lambda: os.path.exists('release'), True)]\""
)


@pytest.mark.skipif(not is_root(), reason="cgroups need root")
async def test_the_memory_of_all_commands_together_is_capped_by_a_parent_cgroup(
    workspace, data_dir
):
    service, channel, runner = await start_runner(
        workspace, data_dir, total_memory_mb=1536, memory_mb=1024
    )
    try:
        parents = runner.core.sandbox.cgroups.parents
        assert parents, runner.core.sandbox.warnings
        for key, parent in parents.items():
            if key in ("memory", ""):
                name = "memory.limit_in_bytes" if key else "memory.max"
                assert (parent / name).read_text().strip() == str(1536 << 20)
        marks = marks_dir(workspace)
        calls = [
            asyncio.create_task(runner.sh(HOLD_MEMORY.format(name=f"m{n}"), timeout=120))
            for n in range(3)
        ]  # 3 x 700 MiB: each under its own 1024, together over 1536
        await until(lambda: any(c.done() for c in calls) or len(list(marks.glob("*.held"))) == 3)
        (workspace / "release").touch()
        codes = sorted(r.exit_code for r in await asyncio.gather(*calls))
        assert 0 in codes and 137 in codes, codes  # one killed by the total, not all
        assert host_processes("b'x' * (700 << 20)") == []
    finally:
        await stop_runner(service, channel, runner)
