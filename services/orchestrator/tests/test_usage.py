"""What it costs: each LLM request recorded in PostgreSQL (answered or failed), summed over
REST, and daily budgets that refuse turns past them, on every replica, with a notification."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from orchestrator.app import create_app
from orchestrator.core import OrchestratorCore
from orchestrator.store.usage import Budget, UsageStore
from orchestrator.usage.budgets import BudgetExceeded, BudgetGuard

from tests.fakes import FakeLLM

from .conftest import make_settings

PRICE = '{"input": 2.0, "output": 10.0, "cached": 0.5}'  # USD per million tokens


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A provider with a prompt cache: the second request of a turn reports cached tokens."""
    with FakeLLM(prompt_cache=True) as fake:
        yield fake


async def rows(core: OrchestratorCore) -> list[dict[str, Any]]:
    async with core.db.connection() as conn:
        cursor = await conn.execute("SELECT * FROM llm_requests ORDER BY id")
        return list(await cursor.fetchall())


async def test_each_request_of_a_turn_is_recorded_with_tokens_price_and_who_asked(
    core_factory, fake_llm: FakeLLM
):
    core: OrchestratorCore = await core_factory(CRAYFISH_MODEL_PRICE=PRICE)
    fake_llm.reply_tool_calls(("echo", {"text": "hi"}))
    fake_llm.reply_text("done", usage={"completion_tokens": 40})
    turn = await core.turns.wait((await core.submit("s1", "say hi")).id, 30)
    assert turn.status == "completed"
    first, second = await rows(core)
    for row in (first, second):
        assert (row["session_id"], row["task_id"], row["kind"]) == ("s1", turn.id, "chat")
        assert row["preset"] == "fake-model" and row["model"] == "fake-model"
        assert row["prompt_tokens"] > 0 and row["latency_ms"] > 0 and row["error"] == ""
    # The provider's cache held the first request's messages when the second came.
    assert first["cached_tokens"] == 0 and 0 < second["cached_tokens"] < second["prompt_tokens"]
    assert second["completion_tokens"] == 40
    cached = second["cached_tokens"]
    expected = ((second["prompt_tokens"] - cached) * 2.0 + cached * 0.5 + 40 * 10.0) / 1e6
    assert second["price"] == pytest.approx(expected)
    # The turn's own usage and the records agree.
    assert turn.usage["prompt_tokens"] == first["prompt_tokens"] + second["prompt_tokens"]


async def test_a_failed_request_is_recorded_with_its_error(core_factory, fake_llm: FakeLLM):
    core: OrchestratorCore = await core_factory()
    fake_llm.reply_error(400, "this model does not take that", type="invalid_request_error")
    turn = await core.turns.wait((await core.submit("s1", "hello")).id, 30)
    assert turn.status == "failed"
    (row,) = await rows(core)
    assert "this model does not take that" in row["error"]
    assert row["prompt_tokens"] == 0 and row["price"] is None
    report = await core.usage_report("kind", None, None)
    assert report["rows"][0]["key"] == "chat" and report["rows"][0]["failed"] == 1


async def test_usage_is_summed_by_day_session_model_and_kind(core_factory, fake_llm: FakeLLM):
    core: OrchestratorCore = await core_factory(CRAYFISH_MODEL_PRICE=PRICE)
    fake_llm.reply_forever_text("ok")
    for session in ("a", "a", "b"):
        await core.turns.wait((await core.submit(session, "hello")).id, 30)
    by_session = await core.usage_report("session", None, None)
    assert [(r["key"], r["requests"]) for r in by_session["rows"]] == [("a", 2), ("b", 1)]
    assert by_session["total"]["requests"] == 3 and by_session["total"]["price"] > 0
    by_day = await core.usage_report("day", None, None)
    assert len(by_day["rows"]) == 30  # every day of the chart, idle ones at 0
    assert by_day["rows"][-1]["requests"] == 3 and by_day["rows"][0]["requests"] == 0
    by_model = await core.usage_report("model", "1d", None)
    assert [r["key"] for r in by_model["rows"]] == ["fake-model"]


async def test_past_the_daily_token_cap_turns_are_refused_on_every_replica(
    core_factory, fake_llm: FakeLLM
):
    fake_llm.reply_forever_text("ok")
    one: OrchestratorCore = await core_factory()
    other: OrchestratorCore = await core_factory()
    await one.replace_usage_budget(Budget(daily_tokens=1))
    first = await one.turns.wait((await one.submit("s1", "hello")).id, 30)
    assert first.status == "completed"  # nothing spent yet when it was sent
    with pytest.raises(BudgetExceeded) as refused:
        await other.submit("s2", "hello again")  # the other replica counts the same rows
    assert refused.value.cap == "daily_tokens"
    assert "daily budget `daily_tokens` is used up" in str(refused.value)
    with pytest.raises(BudgetExceeded):
        await one.submit("s3", "and again")
    # The user is told, once for the cap and day, however many replicas refused turns.
    events = await one.turns.events.all_events(0)
    notes = [e.data["notification"] for e in events if e.type == "notification"]
    assert len(notes) == 1 and "daily_tokens" in notes[0]["text"]
    # The change takes effect without a restart, within a second on every replica: a raised
    # cap lets turns through again.
    await other.replace_usage_budget(Budget(daily_tokens=10_000_000))
    again = await other.turns.wait((await other.submit("s2", "hello again")).id, 30)
    assert again.status == "completed"
    for _ in range(100):
        try:
            elsewhere = await one.submit("s3", "and on the first replica")
            break
        except BudgetExceeded:
            await asyncio.sleep(0.05)
    assert (await one.turns.wait(elsewhere.id, 30)).status == "completed"


async def test_background_caps_refuse_only_background_turns(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_forever_text("HEARTBEAT_OK")
    core: OrchestratorCore = await core_factory()
    queued = await core.submit("heartbeat", "Heartbeat. Check backups.", kind="heartbeat")
    assert (await core.turns.wait(queued.id, 30)).status == "completed"
    await core.replace_usage_budget(Budget(background_daily_tokens=1))
    # A background turn already queued is refused when it runs, with the reason.
    late = await core.turns.create("heartbeat", "Heartbeat. Check backups.", "heartbeat")
    failed = await core.turns.wait(late.id, 30)
    assert failed.status == "failed" and "background_daily_tokens" in (failed.error or "")
    chat = await core.turns.wait((await core.submit("s1", "hello")).id, 30)
    assert chat.status == "completed"  # a chat turn is not a background turn


def test_rest_usage_budget_and_the_429(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.reply_forever_text("ok")
    settings = make_settings(tmp_path, fake_llm.base_url, 1, CRAYFISH_MODEL_PRICE=PRICE)
    with TestClient(create_app(settings)) as client:
        empty = client.get("/api/usage/budget").json()
        assert empty["daily_tokens"] is None and empty["today"]["tokens"] == 0
        sent = client.post("/api/chat", json={"message": "hi"})
        assert sent.status_code == 202
        finished(client, sent.json()["task_id"])
        put = client.put("/api/usage/budget", json={"daily_tokens": 5, "daily_usd": 0.5})
        assert put.status_code == 200 and put.json()["today"]["tokens"] > 5
        refused = client.post("/api/chat", json={"message": "again"})
        assert refused.status_code == 429
        error = refused.json()["error"]
        assert error["code"] == "budget_exceeded" and "daily_tokens" in error["message"]
        assert refused.headers["X-Crayfish-Budget-Cap"] == "daily_tokens"
        v1 = client.post(
            "/v1/chat/completions",
            json={"model": "crayfish", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert v1.status_code == 429 and v1.json()["error"]["code"] == "budget_exceeded"
        (tmp_path / "workspace" / "HEARTBEAT.md").write_text("- Check the backups\n")
        beat = client.post("/api/heartbeat")
        assert beat.status_code == 429 and "daily_tokens" in beat.json()["error"]["message"]
        usage = client.get("/api/usage", params={"by": "kind", "since": "2d"}).json()
        assert usage["rows"][0]["key"] == "chat" and usage["rows"][0]["requests"] == 1


def finished(client: TestClient, task_id: str) -> dict[str, Any]:
    for _ in range(300):
        turn = client.get(f"/api/tasks/{task_id}").json()
        if turn["status"] not in ("queued", "running"):
            return turn
        time.sleep(0.05)
    raise AssertionError(f"task {task_id} did not finish")


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"by": "week"}, "query.by"),
        ({"since": "yesterday"}, "`since`: expected a date"),
        ({"since": "2026-13-01"}, "`since`: expected a date"),
        ({"since": "3d", "until": "5d"}, "`until` must come after `since`"),
    ],
)
def test_bad_usage_queries_are_400_saying_which(
    tmp_path: Path, fake_llm: FakeLLM, params: dict[str, str], says: str
) -> None:
    settings = make_settings(tmp_path, fake_llm.base_url, 1)
    with TestClient(create_app(settings)) as client:
        reply = client.get("/api/usage", params=params)
        assert reply.status_code == 400, reply.text
        assert says in reply.json()["error"]["message"]
        bad_budget = client.put("/api/usage/budget", json={"daily_tokens": -1, "daily_tokenz": 1})
        assert bad_budget.status_code == 400
        assert "daily_tokenz" in bad_budget.json()["error"]["message"]


async def test_a_schedules_turn_is_light_the_minimal_prompt_and_its_last_turns(
    core_factory, fake_llm: FakeLLM
):
    fake_llm.reply_forever_text("Backups fine.")
    core: OrchestratorCore = await core_factory(CRAYFISH_BACKGROUND_HISTORY_TURNS=2)
    for n in range(4):
        queued = await core.submit("schedule-backups", f"Check the backups ({n}).", "schedule")
        assert (await core.turns.wait(queued.id, 30)).status == "completed"
    messages = fake_llm.last_request["messages"]
    # The system prompt, the last 2 of 3 earlier turns (each a question and its answer), then
    # this turn's message.
    roles = ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m["role"] for m in messages] == roles
    assert "(1)" in messages[1]["content"] and "(3)" in messages[-1]["content"]
    assert "## Memory Recall" not in messages[0]["content"]
    kinds = await core.usage_report("kind", None, None)
    assert [(r["key"], r["requests"]) for r in kinds["rows"]] == [("schedule", 4)]


async def test_a_cap_passed_mid_turn_stops_it_before_its_next_request(
    core_factory, fake_llm: FakeLLM
):
    core: OrchestratorCore = await core_factory()
    await core.replace_usage_budget(Budget(daily_tokens=1))  # nothing spent: the turn starts
    fake_llm.reply_tool_calls(("echo", {"text": "one"}))
    fake_llm.reply_text("never asked")
    turn = await core.turns.wait((await core.submit("s1", "echo twice")).id, 30)
    assert turn.status == "failed" and "daily_tokens" in (turn.error or "")
    assert len(fake_llm.requests) == 1 and fake_llm.pending == 1  # round 2 was not sent
    (row,) = await rows(core)
    assert row["error"] == ""  # the refused request never reached the provider


class CountedReads(UsageStore):
    """The real store, counting how often the caps are read from PostgreSQL."""

    reads = 0

    async def budget(self) -> Budget:
        self.reads += 1
        return await super().budget()


async def test_a_burst_of_turns_reads_the_caps_once_and_a_new_cap_counts_at_once(
    core_factory,
):
    core: OrchestratorCore = await core_factory()
    store = CountedReads(core.db)

    async def alert(title: str, text: str) -> None:
        pass

    guard = BudgetGuard(store, "UTC", alert)
    await asyncio.gather(*(guard.check("openai") for _ in range(50)))
    assert store.reads == 1  # not one read per turn while the first is on its way
    await store.put_budget(Budget(daily_tokens=1))  # as another replica would
    await asyncio.sleep(1.1)  # the caps read are stale now: the next check reads them again
    reading = asyncio.gather(*(guard.budget() for _ in range(5)), return_exceptions=True)
    await guard.replace(Budget(daily_tokens=7))  # this replica's change, while reading
    await reading
    assert await guard.budget() == Budget(daily_tokens=7)
