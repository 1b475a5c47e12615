"""Schedules: the rules (at/every/cron, missed firings), the REST API, firing as turns once per
due time across two cores on one database, slow turns' firings skipped, and the model's tools
bounded per session and in all (a chain of own-session schedules included)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient
from orchestrator.app import create_app
from orchestrator.content.own_tools import describe_schedule
from orchestrator.core import OrchestratorCore
from orchestrator.schedules.schedule_rules import ScheduleInvalid, Timing, next_run, parse_timing
from orchestrator.schedules.scheduler import Scheduler

from tests.fakes import FakeLLM, Reply, ToolCall

from .conftest import make_settings

NOW = datetime(2026, 3, 28, 12, 0, tzinfo=UTC).timestamp()


def timing(**given: object) -> Timing:
    args = {"at": None, "every": None, "cron": None, "timezone": None, **given}
    return parse_timing(**args, now=NOW, min_every=60, default_timezone="")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ({}, "exactly one of"),
        ({"every": 60, "cron": "* * * * *"}, "got every, cron"),
        ({"every": 5}, "at least 60 seconds"),
        ({"every": 1e12}, "at most"),
        ({"at": "2026-03-28T11:00:00+00:00"}, "in the past"),
        ({"at": "2026-03-29T11:00:00"}, "needs a UTC offset"),
        ({"at": "tomorrow"}, "not an ISO-8601 time"),
        ({"cron": "0 0 9 * * *"}, "five fields"),
        ({"cron": "61 * * * *"}, "not a valid expression"),
        ({"cron": "0 9 * * *", "timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"every": 60, "timezone": "UTC"}, "goes with `cron` only"),
        # Past year 9999 in UTC (stored by the old code, then every listing failed).
        ({"at": "9999-12-31T23:59:59-14:00"}, "more than 100 years ahead"),
        ({"at": "2200-01-01T00:00:00+00:00"}, "more than 100 years ahead"),
        ({"at": "0001-01-01T00:00:00+14:00"}, "in the past"),
        ({"at": "0001-01-01T00:00:00-14:00"}, "in the past"),
        ({"at": "2027-01-01T00:00:00+00:00" + " " * 60}, "over 64 characters"),
        ({"cron": "0 9 * * *", "timezone": "Europe"}, "unknown time zone"),
        ({"cron": "0 9 * * *", "timezone": "/etc/passwd"}, "unknown time zone"),
        ({"cron": "0 9 * * *", "timezone": "../../etc/localtime"}, "unknown time zone"),
        ({"cron": "0 9 * * *", "timezone": "Europe/Paris\x00"}, "unknown time zone"),
        ({"cron": "0 9 * * *", "timezone": "x" * 300}, "over 64 characters"),
        ({"cron": "0 0 31 2 *"}, "never fires"),
        ({"cron": "H * * * *"}, "not a valid expression"),
        ({"cron": "*/0 * * * *"}, "not a valid expression"),
    ],
)
def test_bad_timings_are_refused_with_the_reason(given: dict[str, object], reason: str) -> None:
    with pytest.raises(ScheduleInvalid, match=reason):
        timing(**given)


@pytest.mark.parametrize(
    ("cron", "zone", "refused"),
    [
        ("* * * * *", "UTC", "60 seconds apart"),
        ("*/30 * * * *", "UTC", "1800 seconds apart"),
        ("0,1 * * * *", "Asia/Kolkata", "60 seconds apart"),
        # Rare short gaps count too: twice in a minute on one day of the year.
        ("0,1 0 1 1 *", "UTC", "60 seconds apart"),
        ("0 * * * *", "UTC", None),
        ("0 9 * * *", "Europe/Paris", None),
        ("30 2 * * *", "Europe/Paris", None),  # 02:30 twice the night clocks go back
    ],
)
def test_cron_obeys_the_minimum_interval(cron: str, zone: str, refused: str | None) -> None:
    def parse(min_every: float) -> Timing:
        return parse_timing(
            None, None, cron, zone, now=NOW, min_every=min_every, default_timezone=""
        )

    if refused is None:
        assert parse(3600).cron == cron
        return
    with pytest.raises(ScheduleInvalid, match=f"{refused}.*CRAYFISH_SCHEDULE_MIN_EVERY"):
        parse(3600)
    assert parse(60).cron == cron  # the default minimum lets it through


def test_a_daily_cron_keeps_a_days_minimum_across_dst() -> None:
    # 23 hours apart in real time on the day clocks go forward; 24 on the zone's clock.
    daily = parse_timing(
        None, None, "0 9 * * *", "Europe/Paris", now=NOW, min_every=86400, default_timezone=""
    )
    assert daily.timezone == "Europe/Paris"
    with pytest.raises(ScheduleInvalid, match="CRAYFISH_SCHEDULE_MIN_EVERY"):
        parse_timing(
            None, None, "0 9,21 * * *", "UTC", now=NOW, min_every=86400, default_timezone=""
        )


def test_cron_fires_in_its_time_zone_across_a_dst_change() -> None:
    # Europe/Paris moves to summer time on 2026-03-29: 09:00 is 08:00 UTC before, 07:00 after.
    daily = timing(cron="0 9 * * *", timezone="Europe/Paris")
    morning = NOW - 6 * 3600  # 07:00 in Paris on the 28th
    first = next_run(daily, morning, morning)
    second = next_run(daily, first or 0, first or 0)
    assert datetime.fromtimestamp(first or 0, UTC).hour == 8
    assert datetime.fromtimestamp(second or 0, UTC).hour == 7


def test_missed_firings_run_once_then_the_rhythm_resumes() -> None:
    hourly = timing(every=3600)
    due = NOW - 5.5 * 3600  # five and a half periods missed while nothing ran
    following = next_run(hourly, due, NOW)
    assert following == due + 6 * 3600 and NOW < following <= NOW + 3600
    assert next_run(timing(at="2026-03-28T13:00:00+00:00"), NOW + 3600, NOW + 3600) is None


@pytest.fixture
def client(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[TestClient]:
    settings = make_settings(tmp_path, fake_llm.base_url, 1, CRAYFISH_TIMEZONE="Asia/Shanghai")
    with TestClient(create_app(settings)) as client:
        yield client


def test_the_rest_api_creates_lists_and_deletes_schedules(client: TestClient) -> None:
    made = client.post("/api/schedules", json={"message": "check the backups", "cron": "0 9 * * *"})
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["timezone"] == "Asia/Shanghai" and body["next_run"].endswith("T09:00:00+08:00")
    assert body["session_id"] == f"schedule-{body['id']}"
    once = client.post(
        "/api/schedules",
        json={"message": "hi", "at": "2099-01-01T00:00:00Z", "session_id": "mine"},
    ).json()
    listed = client.get("/api/schedules").json()["schedules"]
    assert [s["id"] for s in listed] == [body["id"], once["id"]]  # the soonest first
    assert listed[1]["session_id"] == "mine" and listed[1]["at"] == "2099-01-01T00:00:00+00:00"
    assert client.delete(f"/api/schedules/{body['id']}").status_code == 204
    assert client.delete(f"/api/schedules/{body['id']}").status_code == 404
    assert [s["id"] for s in client.get("/api/schedules").json()["schedules"]] == [once["id"]]


def test_the_rest_api_refuses_bad_schedules_with_422(client: TestClient) -> None:
    for bad, reason in [
        ({"message": "x", "every": 60, "at": "2099-01-01T00:00:00Z"}, "exactly one of"),
        ({"message": "x", "at": "2000-01-01T00:00:00Z"}, "in the past"),
        ({"message": "x", "cron": "every day"}, "five fields"),
        ({"message": "x", "every": 60, "session_id": "no spaces"}, "session"),
    ]:
        reply = client.post("/api/schedules", json=bad)
        assert reply.status_code == 422, bad
        assert reason in reply.json()["error"]["message"]
    assert client.get("/api/schedules").json()["schedules"] == []


async def tasks_of(core: OrchestratorCore, kind: str = "schedule") -> list:
    events = await core.turns.events.all_events(0)
    ids = dict.fromkeys(e.task_id for e in events if e.data.get("kind") == kind)
    return [turn for task_id in ids if (turn := await core.turns.get(task_id))]


async def wait_for(condition: Callable[[], Awaitable[bool]]) -> None:
    for _ in range(400):
        if await condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("not reached in time")


FAST = {"CRAYFISH_SCHEDULE_POLL": 0.05, "CRAYFISH_SCHEDULE_MIN_EVERY": 0.1}


async def test_a_firing_is_a_turn_in_its_session_and_ok_is_not_delivered(
    core_factory, fake_llm: FakeLLM
):
    fake_llm.reply_text("HEARTBEAT_OK")
    core: OrchestratorCore = await core_factory(**FAST)
    at = datetime.fromtimestamp(time.time() + 0.3, UTC).isoformat()
    entry = await core.scheduler.add("look at the disk", session_id="ops", at=at)

    async def done() -> bool:
        return any(t.done for t in await tasks_of(core))

    await wait_for(done)
    (turn,) = await tasks_of(core)
    assert turn.status == "completed" and turn.session_id == "ops"
    assert turn.delivered is False and turn.result == ""
    sent = fake_llm.requests[0]["messages"][-1]["content"]
    assert "look at the disk" in sent and "HEARTBEAT_OK" in sent
    assert await core.scheduler.entries() == []  # an `at` schedule is done once it fired
    assert entry.id in turn.id


async def test_a_missed_firing_runs_once_late_then_resumes(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_forever_text("NO_REPLY")
    core: OrchestratorCore = await core_factory(**{**FAST, "CRAYFISH_SCHEDULE_MIN_EVERY": 60})
    await core.scheduler.close()  # no firing while the clock is set back
    entry = await core.scheduler.add("hourly check", every=3600)
    async with core.db.connection() as conn:  # as if the orchestrators were down for 5 hours
        await conn.execute(
            "UPDATE scheduled_turns SET next_run = %s WHERE id = %s",
            (time.time() - 5 * 3600 - 10, entry.id),
        )
    fired = await core.scheduler.fire_due()
    assert len(fired) == 1 and await core.scheduler.fire_due() == []
    (after,) = await core.scheduler.entries()
    assert time.time() < after.next_run <= time.time() + 3600 and after.runs == 1


async def test_two_cores_fire_each_due_time_once(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_forever_text("NO_REPLY")
    one: OrchestratorCore = await core_factory(**FAST)
    two: OrchestratorCore = await core_factory(**FAST)
    entry = await one.scheduler.add("tick", every=0.2, session_id="ticks")
    await asyncio.sleep(2.0)
    await one.scheduler.close()
    await two.scheduler.close()
    fired = await tasks_of(one)

    async def all_done() -> bool:
        return all(t.done for t in await tasks_of(one))

    await wait_for(all_done)
    (row,) = await one.scheduler.entries()
    assert len(fired) == row.runs >= 3
    due_times = [t.id.rsplit("-", 1)[1] for t in fired]
    assert len(set(due_times)) == len(due_times)
    asked = [r for r in fake_llm.requests if "tick" in r["messages"][-1]["content"]]
    assert len(asked) == len(fired)  # each firing reached the model once
    assert entry.session_id == "ticks"


async def test_closing_mid_firing_finishes_it_queued_and_recorded(core_factory, fake_llm):
    fake_llm.reply_forever_text("NO_REPLY")
    core: OrchestratorCore = await core_factory(**FAST)
    await core.scheduler.close()  # only the slow scheduler below fires
    entered = asyncio.Event()

    async def slow_submit(
        session_id: str, message: str, kind: str, task_id: str, model: str | None
    ) -> object:
        entered.set()
        await asyncio.sleep(0.3)  # closing arrives while the turn is being queued
        return await core.turns.create(session_id, message, kind, task_id)

    slow = Scheduler(core.scheduler.store, slow_submit, core.settings)
    at = datetime.fromtimestamp(time.time() + 0.1, UTC).isoformat()
    entry = await slow.add("once", session_id="closing", at=at)
    await slow.start()
    await asyncio.wait_for(entered.wait(), 5)
    await slow.close()
    (turn,) = await tasks_of(core)
    assert entry.id in turn.id
    assert await slow.entries() == []  # the firing was recorded: the `at` schedule is done


async def test_the_models_tools_are_bounded_per_session(core_factory):
    core: OrchestratorCore = await core_factory(CRAYFISH_SCHEDULES_PER_SESSION=2)
    registry = core.assistant.registry
    await registry.refresh(force=True)
    assert {"schedule_add", "schedule_list", "schedule_remove", "notify"} <= set(registry.tools)

    async def add(session: str, message: str) -> str:
        args = f'{{"message": "{message}", "every": 3600}}'
        return (await registry.run("schedule_add", args, session, "c1")).output

    assert (await add("chat-a", "one")).startswith("Scheduled ")
    await add("chat-a", "two")
    assert "already has 2 schedules" in await add("chat-a", "three")
    assert (await add("chat-b", "other")).startswith("Scheduled ")  # another session's bound
    listed = await registry.run("schedule_list", "{}", "chat-a", "c2")
    assert "'one'" in listed.output and "'other'" not in listed.output
    other = (await core.scheduler.entries("chat-b"))[0].id
    refused = await registry.run("schedule_remove", f'{{"id": "{other}"}}', "chat-a", "c3")
    assert not refused.ok and "no schedule" in refused.output
    bad = await registry.run("schedule_add", '{"message": "x", "every": 1}', "chat-a", "c4")
    assert not bad.ok and "at least 60 seconds" in bad.output


async def test_a_slow_turns_firings_are_skipped_not_piled_up(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_forever_text("NO_REPLY", delay=0.8)  # each turn outlasts four firings
    core: OrchestratorCore = await core_factory(**FAST)
    await core.scheduler.add("slow check", every=0.2, session_id="slow")
    await asyncio.sleep(2.5)
    await core.scheduler.close()

    async def all_done() -> bool:
        return all(t.done for t in await tasks_of(core))

    await wait_for(all_done)
    turns = sorted(await tasks_of(core), key=lambda t: t.created_at)
    (row,) = await core.scheduler.entries()
    # Twelve due times passed; a firing was queued only once the previous turn had ended.
    assert 1 <= len(turns) == row.runs <= 4
    for before, after in itertools.pairwise(turns):
        assert before.finished_at is not None and after.created_at >= before.finished_at
    assert describe_schedule(row)["skipped"] == row.skipped >= 3
    assert len(fake_llm.requests) == len(turns)


def spawning_model(body: dict) -> Reply:
    """A model that answers every scheduled (or user) message by scheduling another check in
    its own session, and says NO_REPLY once the tool answered."""
    if body["messages"][-1]["role"] == "tool":
        return Reply(text="NO_REPLY")
    args = '{"message": "check, and schedule another check", "every": 0.2, "own_session": true}'
    return Reply(tool_calls=[ToolCall("schedule_add", args)])


async def test_schedules_that_make_schedules_stop_at_the_models_total(
    core_factory, fake_llm: FakeLLM
):
    fake_llm.reply_forever_with(spawning_model)
    core: OrchestratorCore = await core_factory(**FAST, CRAYFISH_SCHEDULES_MAX_MODEL=4)
    await core.submit("chat-a", "keep an eye on it")  # makes the first; each firing one more

    def refusals() -> list[str]:
        return [
            str(r["messages"][-1]["content"])
            for r in fake_llm.requests
            if r["messages"][-1]["role"] == "tool"
            and "CRAYFISH_SCHEDULES_MAX_MODEL" in str(r["messages"][-1]["content"])
        ]

    async def refused_twice() -> bool:
        return len(refusals()) >= 2

    await wait_for(refused_twice)
    await asyncio.sleep(0.5)  # firings go on; none adds a schedule
    made = [e for e in await core.scheduler.entries() if e.created_in is not None]
    assert len(made) == 4
    # A chain: all but the first were made in the own session of an earlier one.
    assert sum(e.created_in.startswith("schedule-") for e in made if e.created_in) == 3
    assert "already number 4 in all sessions" in refusals()[0]
    assert "no schedule was added" in refusals()[0]
    await core.scheduler.close()
    # The user's own schedules are not bounded by the model's total.
    assert (await core.scheduler.add("mine", every=3600)).created_in is None


def test_one_bad_row_does_not_break_the_listing(client: TestClient) -> None:
    far = "9999-12-31T23:59:59-14:00"  # past year 9999 in UTC
    refused = client.post("/api/schedules", json={"message": "x", "at": far})
    assert refused.status_code == 422 and "100 years" in refused.json()["error"]["message"]
    good = client.post("/api/schedules", json={"message": "ok", "every": 3600}).json()
    # A row as the old code stored it: the listing used to answer 500 from then on.
    core: OrchestratorCore = client.app.state.core  # type: ignore[attr-defined]
    with psycopg.connect(core.settings.database_url) as conn:
        conn.execute(
            "INSERT INTO scheduled_turns (id, session_id, message, kind, at_time, next_run,"
            " created_at) VALUES ('bad0000001', 's', 'far', 'at', %s, %s, 0)",
            (datetime.fromisoformat(far).timestamp(),) * 2,
        )
    listing = client.get("/api/schedules")
    assert listing.status_code == 200, listing.text
    shown = {s["id"]: s for s in listing.json()["schedules"]}
    assert shown[good["id"]]["broken"] is None and shown[good["id"]]["next_run"]
    assert "remove it" in shown["bad0000001"]["broken"]
    assert shown["bad0000001"]["message"] == "far"
    assert client.delete("/api/schedules/bad0000001").status_code == 204
    assert [s["id"] for s in client.get("/api/schedules").json()["schedules"]] == [good["id"]]


async def test_the_model_gets_reasons_and_lists_past_a_bad_row(core_factory, fake_llm: FakeLLM):
    core: OrchestratorCore = await core_factory(CRAYFISH_SCHEDULE_MIN_EVERY=3600)
    async with core.db.connection() as conn:  # a row stored before fields were checked
        await conn.execute(
            "INSERT INTO scheduled_turns (id, session_id, message, kind, cron, timezone,"
            " next_run, created_in, created_at) VALUES ('bad0000002', 'chat', 'old', 'cron',"
            " '0 9 * * *', 'Mars/Olympus', %s, 'chat', 0)",
            (time.time() + 3600,),
        )
    fake_llm.reply_tool_calls(
        ("schedule_add", {"message": "x", "at": "9999-12-31T23:59:59-14:00"}),
        ("schedule_add", {"message": "x", "cron": "* * * * *"}),
        ("schedule_add", {"message": "x", "cron": "0 9 * * *", "timezone": "Europe"}),
        ("schedule_list", {}),
    )
    fake_llm.reply_text("done")
    turn = await core.submit("chat", "schedule it")
    assert (await core.turns.wait(turn.id, 30)).status == "completed"
    results = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert "more than 100 years ahead" in results[0]
    assert "60 seconds apart" in results[1] and "CRAYFISH_SCHEDULE_MIN_EVERY" in results[1]
    assert "unknown time zone 'Europe'" in results[2]
    assert "bad0000002" in results[3] and "BROKEN" in results[3]
    assert [e.id for e in await core.scheduler.entries()] == ["bad0000002"]


async def test_a_due_bad_row_does_not_stop_the_others_firing(
    core_factory, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
):
    fake_llm.reply_forever_text("NO_REPLY")
    core: OrchestratorCore = await core_factory(**FAST)
    await core.scheduler.close()  # only the calls below fire
    async with core.db.connection() as conn:
        await conn.execute(
            "INSERT INTO scheduled_turns (id, session_id, message, kind, cron, timezone,"
            " next_run, created_at) VALUES ('bad0000003', 's', 'old', 'cron', '0 9 * * *',"
            " 'Mars/Olympus', %s, 0)",
            (time.time() - 5,),
        )
    good = await core.scheduler.add("tick", every=0.1)
    await asyncio.sleep(0.2)
    fired = [await core.scheduler.fire_due() for _ in range(3)]
    assert any(good.id in task_id for task_id in fired[0])
    reported = [r for r in caplog.records if "bad0000003 cannot fire" in r.getMessage()]
    assert len(reported) == 1  # once, not at every look
