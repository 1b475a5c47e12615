"""SingleFlight: turns that start together share one fetch; it never outlives its callers."""

from __future__ import annotations

import asyncio

import pytest
from orchestrator.clients.single_flight import SingleFlight


async def test_callers_that_come_together_share_one_fetch_and_later_ones_fetch_anew():
    calls = 0
    release = asyncio.Event()

    async def fetch() -> int:
        nonlocal calls
        calls += 1
        await release.wait()
        return calls

    shared = SingleFlight(fetch)
    waiting = [asyncio.create_task(shared()) for _ in range(20)]
    await asyncio.sleep(0.01)
    release.set()
    assert await asyncio.gather(*waiting) == [1] * 20
    assert await shared() == 2  # the first fetch is over: a new one


async def test_a_cancelled_caller_leaves_the_fetch_to_the_others_and_the_last_one_ends_it():
    started, finished = asyncio.Event(), asyncio.Event()

    async def fetch() -> str:
        started.set()
        try:
            await asyncio.sleep(3600)
        finally:
            finished.set()
        return "never"

    shared = SingleFlight(fetch)
    first, second = asyncio.create_task(shared()), asyncio.create_task(shared())
    await started.wait()
    first.cancel()
    await asyncio.sleep(0.01)
    assert not finished.is_set()  # the second still waits for it
    second.cancel()
    await asyncio.wait_for(finished.wait(), 1)  # nobody waits: the fetch is cancelled
    for task in (first, second):
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_failed_fetch_fails_its_callers_and_the_next_call_tries_again():
    outcomes = iter([RuntimeError("down"), "up"])

    async def fetch() -> str:
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    shared = SingleFlight(fetch)
    with pytest.raises(RuntimeError, match="down"):
        await shared()
    assert await shared() == "up"
