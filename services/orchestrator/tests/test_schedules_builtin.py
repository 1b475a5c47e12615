"""The built-in schedules (heartbeat, event retention): fired by the one scheduler, each due time
once across two cores; neither listed, removable nor counted as users' or the model's schedules;
their rhythm kept across the migration that dropped the claims table they had."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient
from orchestrator.app import create_app
from orchestrator.core import OrchestratorCore
from orchestrator.store import migrations

from tests.fakes import FakeLLM
from tests.postgres import empty_database

from .conftest import make_settings

BUILTINS = {"heartbeat", "events-retention", "idle-summaries", "consolidate"}


async def builtin_rows(core: OrchestratorCore) -> dict[str, dict[str, float]]:
    """The built-in rows of `scheduled_turns`: next_run and runs by id."""
    async with core.db.connection() as conn:
        cursor = await conn.execute(
            "SELECT id, next_run, runs FROM scheduled_turns WHERE builtin ORDER BY id"
        )
        return {row["id"]: row for row in await cursor.fetchall()}


async def make_due(core: OrchestratorCore, name: str) -> None:
    """As if the built-in's time had come (an hour passed, for the retention)."""
    async with core.db.connection() as conn:
        await conn.execute(
            "UPDATE scheduled_turns SET next_run = %s WHERE id = %s", (time.time() - 1, name)
        )


@pytest.fixture
def client(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[TestClient]:
    settings = make_settings(tmp_path, fake_llm.base_url, 1, CRAYFISH_HEARTBEAT_INTERVAL=3600)
    with TestClient(create_app(settings)) as client:
        yield client


def test_the_rest_api_neither_lists_nor_removes_builtin_schedules(client: TestClient) -> None:
    core: OrchestratorCore = client.app.state.core  # type: ignore[attr-defined]
    with psycopg.connect(core.settings.database_url) as conn:
        rows = conn.execute("SELECT id FROM scheduled_turns WHERE builtin").fetchall()
    assert {row[0] for row in rows} == BUILTINS  # they are there, in the users' table
    mine = client.post("/api/schedules", json={"message": "mine", "every": 3600}).json()
    assert [s["id"] for s in client.get("/api/schedules").json()["schedules"]] == [mine["id"]]
    for name in BUILTINS:
        assert client.delete(f"/api/schedules/{name}").status_code == 404
    with psycopg.connect(core.settings.database_url) as conn:
        left = conn.execute("SELECT count(*) FROM scheduled_turns WHERE builtin").fetchone()
    assert left is not None and left[0] == len(BUILTINS)


async def test_the_models_bounds_do_not_count_builtin_schedules(core_factory):
    core: OrchestratorCore = await core_factory(
        CRAYFISH_HEARTBEAT_INTERVAL=3600,
        CRAYFISH_SCHEDULES_PER_SESSION=1,
        CRAYFISH_SCHEDULES_MAX_MODEL=1,
    )
    assert set(await builtin_rows(core)) == BUILTINS
    registry = core.assistant.registry
    await registry.refresh(force=True)
    args = '{"message": "water the plants", "every": 3600}'
    made = await registry.run("schedule_add", args, "chat", "c1")
    assert made.output.startswith("Scheduled "), made.output
    refused = await registry.run("schedule_add", args, "chat", "c2")
    assert "already has 1 schedules" in refused.output  # the bound is there, at one
    listed = await registry.run("schedule_list", "{}", "", "c3")  # the built-ins' session
    assert not any(name in listed.output for name in BUILTINS), listed.output
    removed = await registry.run("schedule_remove", '{"id": "heartbeat"}', "", "c4")
    assert not removed.ok and "heartbeat" in await builtin_rows(core)


async def test_two_cores_prune_old_events_once_per_due_time(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_forever_text("hello")
    hours = 0.3 / 3600  # a finished task's events are old after 0.3 s
    one: OrchestratorCore = await core_factory(CRAYFISH_EVENTS_RETENTION_HOURS=hours)
    two: OrchestratorCore = await core_factory(CRAYFISH_EVENTS_RETENTION_HOURS=hours)
    task = await one.submit("chat", "hi")
    assert (await one.turns.wait(task.id, 30)).status == "completed"
    kept = [e for e in await one.turns.events.all_events(0) if e.task_id == task.id]
    assert len(kept) > 1
    await asyncio.sleep(0.5)
    runs = (await builtin_rows(one))["events-retention"]["runs"]
    for round_ in range(1, 6):
        await make_due(one, "events-retention")
        await asyncio.gather(one.scheduler.fire_due(), two.scheduler.fire_due())
        for _ in range(200):  # claimed by one of the two calls, or by a core's own loop
            now = (await builtin_rows(one))["events-retention"]
            if now["runs"] >= runs + round_:
                break
            await asyncio.sleep(0.05)
        assert now["runs"] == runs + round_, "each due time is claimed once"
        assert now["next_run"] > time.time() + 3000  # an hour on
    left = [e for e in await one.turns.events.all_events(0) if e.task_id == task.id]
    assert [e.type for e in left] == [kept[-1].type]  # its terminal event stays


async def test_the_migration_keeps_the_builtins_rhythm(core_factory, monkeypatch):
    """A database of the release before, with the claims table: its due times carry over, so
    upgrading neither prunes again before the hour is up nor loses the heartbeat's time."""
    url = empty_database()
    now = time.time()
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        with monkeypatch.context() as old_build:
            old_build.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:9])
            await migrations.migrate(conn)
        await conn.execute(
            "INSERT INTO schedules (name, due_at) VALUES ('heartbeat', %s),"
            " ('events-retention', %s)",
            (now + 100, now + 1800),
        )
    core: OrchestratorCore = await core_factory(
        CRAYFISH_DATABASE_URL=url, CRAYFISH_HEARTBEAT_INTERVAL=3600
    )
    rows = await builtin_rows(core)
    assert rows["heartbeat"]["next_run"] == pytest.approx(now + 100)
    assert rows["events-retention"]["next_run"] == pytest.approx(now + 1800)
    assert rows["events-retention"]["runs"] == 0  # not pruned again at the upgrade
    async with core.db.connection() as conn:
        gone = await (await conn.execute("SELECT to_regclass('schedules') AS t")).fetchone()
    assert gone is not None and gone["t"] is None
    assert await core.scheduler.entries() == []


async def test_old_usage_records_are_pruned_with_the_events(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_forever_text("hello")
    days = 0.3 / 86400  # a record is old after 0.3 s
    core: OrchestratorCore = await core_factory(CRAYFISH_USAGE_RETENTION_DAYS=days)
    turn = await core.submit("chat", "hi")
    assert (await core.turns.wait(turn.id, 30)).status == "completed"

    async def records() -> int:
        async with core.db.connection() as conn:
            cursor = await conn.execute("SELECT count(*) AS n FROM llm_requests")
            row = await cursor.fetchone()
        assert row is not None
        return int(row["n"])

    assert await records() == 1
    await asyncio.sleep(0.5)
    runs = (await builtin_rows(core))["events-retention"]["runs"]
    await make_due(core, "events-retention")
    await core.scheduler.fire_due()
    for _ in range(200):  # the pruning runs in a task of its own
        if (await builtin_rows(core))["events-retention"]["runs"] > runs and not await records():
            break
        await asyncio.sleep(0.05)
    assert await records() == 0
