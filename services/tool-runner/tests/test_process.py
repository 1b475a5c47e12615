"""Host processes: a start cut short by cancellation leaves nothing running and nothing hung."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from collections.abc import Callable

import pytest
from tool_runner.sandbox.base import Limits
from tool_runner.sandbox.cgroups import CgroupLimiter
from tool_runner.sandbox.process import discard_process, run_process, spawn_process
from tool_runner.sandbox.warm import Warm, WarmPool

from .conftest import host_processes


async def _within(seconds: float, check: Callable[[], bool]) -> bool:
    """Whether `check()` holds within `seconds`."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


@pytest.mark.parametrize("turns", [1, 2, 3])
async def test_a_start_cancelled_midway_returns_and_leaves_no_process(turns):
    # A child that outlives a kill of the pid asyncio knows and holds the pipes: as bwrap's pid
    # namespace does before --die-with-parent takes hold, and as a killed runner's stray would.
    mark = f"{uuid.uuid4().int % 900 + 100}.75"
    argv = ["/bin/sh", "-c", f"(cat; sleep {mark}) & wait"]
    starting = asyncio.ensure_future(spawn_process(argv, stdin=asyncio.subprocess.PIPE))
    for _ in range(turns):  # cancel at each step of asyncio's start once it has forked
        await asyncio.sleep(0)
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(starting, 5)  # TimeoutError instead: the start hung
    await asyncio.sleep(0.2)
    assert host_processes(mark) == []


async def test_a_stray_that_left_the_commands_session_dies_with_its_cgroup():
    # bwrap's pid namespace runs in a session of its own: killing bwrap's process group cannot
    # reach it, and before --die-with-parent holds nothing else does; its cgroup still holds it.
    limiter = CgroupLimiter()
    if not limiter.setup():
        pytest.skip(f"no per-command cgroups here: {limiter.problem}")
    mark = f"{uuid.uuid4().int % 900 + 100}.125"
    group = limiter.create(memory_mb=64, max_processes=8)
    try:
        # setsid forks (its caller leads a group), and the parent exits at once.
        proc = await spawn_process([*group.shell_prefix(), "setsid", "sleep", mark])
        # Not wait(): asyncio's waits for the stray's pipes too. Its own exit is enough here.
        with contextlib.suppress(ChildProcessError):  # already reaped by asyncio's watcher
            await asyncio.to_thread(os.waitid, os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        await asyncio.wait_for(discard_process(proc), 5)
        # It outlived its command, as such a stray does (on a loaded machine the forked setsid
        # may take a while to become `sleep`).
        assert await _within(10, lambda: host_processes(mark) != [])
        await limiter.remove(group)
        assert await _within(10, lambda: host_processes(mark) == [])
        assert not any(folder.exists() for folder in group.folders)
    finally:
        for pid in host_processes(mark):
            os.kill(pid, signal.SIGKILL)
        await limiter.close()


@pytest.mark.parametrize("turns", [1, 2, 3, 5])
async def test_a_warm_pool_closed_while_it_starts_a_sandbox_returns_and_leaves_none(turns):
    mark = f"{uuid.uuid4().int % 900 + 100}.375"

    async def start(_key: object) -> Warm:  # a sandbox whose stray outlives its pid, as above
        argv = ["/bin/sh", "-c", f"(cat; sleep {mark}) & wait"]
        return Warm(await spawn_process(argv, stdin=asyncio.subprocess.PIPE), lambda: None)

    async def discard(warm: Warm) -> None:
        await discard_process(warm.proc)

    pool = WarmPool(1, start, discard)
    pool.take("limits")
    pool.refill()
    for _ in range(turns):  # close at each step of the start
        await asyncio.sleep(0)
    await asyncio.wait_for(pool.close(), 5)
    await asyncio.sleep(0.2)
    assert pool.ready == [] and host_processes(mark) == []


async def test_the_timeout_holds_when_a_stray_outside_the_group_keeps_the_pipes():
    mark = f"{uuid.uuid4().int % 900 + 100}.625"
    argv = ["/bin/sh", "-c", f"setsid sleep {mark} & echo started; sleep 30"]
    try:
        outcome = await asyncio.wait_for(run_process(argv, Limits(timeout=0.3)), 5)
        assert outcome.timed_out and outcome.stdout.text() == "started\n"
    finally:
        for pid in host_processes(mark):
            os.kill(pid, signal.SIGKILL)
