"""Usage under model presets: each request recorded under the preset that served or failed it,
at that preset's price, every fallback attempt a row; budgets apply to fallbacks too; and
CRAYFISH_MODEL_PRICE is the price of the one preset CRAYFISH_MODEL makes, nothing else."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from orchestrator.core import OrchestratorCore
from orchestrator.store.usage import Budget
from pydantic import ValidationError

from tests.fakes import FakeLLM, Reply
from tests.fakes.completions import ErrorReply

from .conftest import settings_from_env

PRIMARY_PRICE = {"input": 5.0, "output": 20.0}
BACKUP_PRICE = {"input": 1.0, "output": 2.0, "cached": 0.5}


@pytest.fixture
def backup() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


def unavailable(body: dict[str, Any]) -> Reply:
    return Reply(error=ErrorReply(503, "down for maintenance", "server_error", None, {}))


async def two_presets(core_factory: Any, primary: FakeLLM, backup: FakeLLM) -> OrchestratorCore:
    presets = [
        {"name": "primary", "base_url": primary.base_url, "model": "m1", "price": PRIMARY_PRICE},
        {"name": "backup", "base_url": backup.base_url, "model": "m2", "price": BACKUP_PRICE},
    ]
    core: OrchestratorCore = await core_factory(
        CRAYFISH_MODELS=json.dumps(presets),
        CRAYFISH_MODEL_FALLBACKS="backup",
        CRAYFISH_LLM_RETRIES=0,
        CRAYFISH_AUTO_RECALL="false",
    )
    return core


async def rows(core: OrchestratorCore) -> list[dict[str, Any]]:
    async with core.db.connection() as conn:
        cursor = await conn.execute("SELECT * FROM llm_requests ORDER BY id")
        return list(await cursor.fetchall())


async def test_each_attempt_is_recorded_under_its_preset_at_its_price(
    core_factory: Any, fake_llm: FakeLLM, backup: FakeLLM
):
    fake_llm.reply_forever_with(unavailable)
    backup.reply_text("from the backup", usage={"completion_tokens": 30})
    core = await two_presets(core_factory, fake_llm, backup)
    turn = await core.turns.wait((await core.submit("s1", "hello")).id, 30)
    assert (turn.status, turn.result) == ("completed", "from the backup"), turn.error
    failed, served = await rows(core)
    assert (failed["preset"], failed["model"], failed["task_id"]) == ("primary", "m1", turn.id)
    assert "HTTP 503" in failed["error"] and failed["prompt_tokens"] == 0
    assert (served["preset"], served["model"], served["error"]) == ("backup", "m2", "")
    expected = (served["prompt_tokens"] * 1.0 + 30 * 2.0) / 1e6  # the backup's price, not 5/20
    assert served["prompt_tokens"] > 0 and served["price"] == pytest.approx(expected)
    by_model = await core.usage_report("model", "1d", None)
    assert {r["key"]: r["failed"] for r in by_model["rows"]} == {"m1": 1, "m2": 0}


async def test_a_budget_passed_on_the_fallback_stops_the_turn_before_its_next_request(
    core_factory: Any, fake_llm: FakeLLM, backup: FakeLLM
):
    fake_llm.reply_forever_with(unavailable)
    backup.reply_tool_calls(("echo", {"text": "one"}))
    backup.reply_text("never asked")
    core = await two_presets(core_factory, fake_llm, backup)
    await core.replace_usage_budget(Budget(daily_tokens=1))  # nothing spent: the turn starts
    turn = await core.turns.wait((await core.submit("s1", "echo twice")).id, 30)
    assert turn.status == "failed" and "daily_tokens" in (turn.error or ""), turn.error
    # The backup's first answer counted: its second request was refused before it was sent.
    assert len(backup.requests) == 1 and backup.pending == 1
    assert [(r["preset"], r["error"] == "") for r in await rows(core)] == [
        ("primary", False),
        ("backup", True),
    ]


def test_model_price_prices_only_the_preset_of_crayfish_model():
    price = '{"input": 2.0, "output": 8.0}'
    legacy = settings_from_env({"CRAYFISH_MODEL": "solo", "CRAYFISH_MODEL_PRICE": price})
    assert legacy.presets["solo"].price is not None and legacy.presets["solo"].price.output == 8.0
    presets = json.dumps([{"name": "a", "base_url": "http://a.test/v1", "model": "m"}])
    with pytest.raises(ValidationError) as caught:
        settings_from_env({"CRAYFISH_MODELS": presets, "CRAYFISH_MODEL_PRICE": price})
    assert 'give each preset its own "price"' in str(caught.value)
    bad = json.dumps([{"name": "a", "base_url": "http://a.test/v1", "model": "m", "price": {}}])
    with pytest.raises(ValidationError) as unpriced:
        settings_from_env({"CRAYFISH_MODELS": bad})
    assert "price.input" in str(unpriced.value)
