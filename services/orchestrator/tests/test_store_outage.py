"""A turn whose outcome the store could not take ends once the store is back (not `running`
until a restart), and a turn recorded as running on a live replica that no run there holds is
ended by that replica: its session's line goes on and a cancel of it works."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import psycopg
import pytest
from orchestrator.store.turns import Turn
from orchestrator.turns.events import EventSink
from orchestrator.turns.manager import ORPHANED, TurnManager

from .test_tasks import FAST, Replicas, recording_turn


@pytest.fixture
async def replicas() -> AsyncIterator[Replicas]:
    made = Replicas()
    yield made
    for _, manager in list(made.made):
        await made.stop(manager)


def _admin_url(url: str) -> tuple[str, str]:
    """The server's maintenance database, and the name of the database of `url`."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    name, info["dbname"] = str(info["dbname"]), "postgres"
    return psycopg.conninfo.make_conninfo(**info), name


async def _set_read_only(url: str, on: bool) -> None:
    """Makes the database refuse writes (or take them again) as a failed-over or full server
    would: new sessions get the setting, and every open one is ended so none keeps the old."""
    admin, name = _admin_url(url)
    async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
        value = "on" if on else "off"
        await conn.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = {value}')
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
        )


async def _logged(caplog: pytest.LogCaptureFixture, text: str, within: float = 30.0) -> None:
    async with asyncio.timeout(within):
        while not any(text in r.getMessage() for r in caplog.records):  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def _ended(manager: TurnManager, task_id: str, within: float = 30.0) -> Turn:
    """The turn once it has ended, or as it is after `within` seconds (reads that meet a
    connection the outage ended are tried again)."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        with contextlib.suppress(psycopg.OperationalError):
            turn = await manager.wait(task_id, 1.0)
            if turn.done or asyncio.get_running_loop().time() > deadline:
                return turn
        await asyncio.sleep(0.1)


async def test_an_outcome_the_store_refused_is_recorded_once_it_is_back_and_the_line_goes_on(
    replicas: Replicas, caplog: pytest.LogCaptureFixture
):
    answer = asyncio.Event()

    async def run_turn(turn: Turn, emit: EventSink) -> str:
        await answer.wait()
        return turn.message.upper()

    manager = await replicas.start(run_turn)
    first = await manager.create("s1", "one")
    second = await manager.create("s1", "two")
    assert (first.status, second.status) == ("running", "queued")
    await _set_read_only(replicas.url, True)
    try:
        with caplog.at_level(logging.WARNING, logger="orchestrator.turns.manager"):
            answer.set()  # the turn ends while the store refuses its outcome
            await _logged(caplog, "recording its outcome failed")
    finally:
        await _set_read_only(replicas.url, False)

    done = await _ended(manager, first.id)
    assert (done.status, done.result) == ("completed", "ONE")  # the answer was kept
    after = await manager.wait(second.id, 30)
    assert (after.status, after.result) == ("completed", "TWO")


async def test_a_turn_recorded_as_running_here_without_a_run_is_interrupted_and_its_line_goes_on(
    replicas: Replicas,
):
    log: list[str] = []
    manager = await replicas.start(recording_turn(log))
    # What a run that could not record its outcome left behind: its row says it runs here.
    orphan = Turn("orphan-1", "s1", "lost")
    await manager.store.submit(orphan, manager.name)
    assert orphan.status == "running"
    await manager.store.accept(orphan, {"role": "user", "content": "lost"}, load=False)
    queued = await manager.create("s1", "next")
    assert queued.status == "queued"

    ended = await manager.wait(orphan.id, 30)
    assert (ended.status, ended.error) == ("interrupted", ORPHANED)
    done = await manager.wait(queued.id, 30)
    assert (done.status, done.result) == ("completed", "NEXT")
    assert log == ["start next", "end next"]  # the orphan's message was not run again


async def test_a_cancel_of_a_turn_recorded_as_running_here_without_a_run_cancels_it(
    replicas: Replicas,
):
    manager = await replicas.start(recording_turn([]))
    orphan = Turn("orphan-2", "s1", "lost")
    await manager.store.submit(orphan, manager.name)
    await manager.store.accept(orphan, {"role": "user", "content": "lost"}, load=False)

    cancelled = await manager.cancel(orphan, wait=30)
    assert (cancelled.status, cancelled.error) == ("cancelled", "cancelled by request")
    later = await manager.create("s1", "later")
    assert (await manager.wait(later.id, 30)).status == "completed"


async def test_a_turn_running_here_is_never_taken_for_an_orphan(replicas: Replicas):
    release = asyncio.Event()

    async def slow_turn(turn: Turn, emit: EventSink) -> str:
        await release.wait()
        return "done"

    manager = await replicas.start(slow_turn, FAST)
    turn = await manager.create("s1", "slow")
    await asyncio.sleep(FAST.alive_every * 5)  # several marks, with the turn running here
    assert (await manager.get(turn.id)).status == "running"  # type: ignore[union-attr]
    release.set()
    assert (await manager.wait(turn.id, 30)).status == "completed"
