"""Fallback between model presets on a real store: two fake providers (two FakeLLM servers), a
turn whose first preset fails in each way a provider fails, and whether the second one answers.
Prints the table of failures × outcome. Also: every attempt listed when all fail (with the
failed-turn status of the last), and keys rotating with cooldowns."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from orchestrator.agent.key_ring import MAX_COOLDOWN, QUOTA_COOLDOWN, KeyRing
from orchestrator.agent.llm import LLMClient, LLMError
from orchestrator.api.failed_turns import failed_turn
from orchestrator.core import OrchestratorCore

from devstack.launcher import free_port
from tests.fakes import FakeLLM, Reply
from tests.fakes.completions import ErrorReply
from tests.stacks import print_figures

from .conftest import settings_from_env

FIGURES: list[str] = []
ANSWER = "the backup answers"
PARTIAL = "The answer is MARK"


@pytest.fixture
def backup() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        fake.reply_forever_text(ANSWER)
        yield fake


@pytest.fixture(scope="module", autouse=True)
def _figures(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if FIGURES:
        title = (
            "\nProvider failures × outcome (preset `primary` fails, `backup` is its fallback;"
            " CRAYFISH_LLM_RETRIES=1):\n"
            f"{'failure of primary':44} | {'outcome':28} | primary reqs | backup reqs"
        )
        print_figures(request, [title, *FIGURES])


def presets(primary_url: str, backup_url: str, keys: str = "KEY_A") -> str:
    return json.dumps(
        [
            {"name": "primary", "base_url": primary_url, "model": "m1", "api_key_env": keys},
            {"name": "backup", "base_url": backup_url, "model": "m2", "api_key_env": "KEY_B"},
        ]
    )


def error(status: int, code: str | None = None, kind: str = "invalid_request_error") -> Reply:
    return Reply(error=ErrorReply(status, f"scripted {status} {code or ''}", kind, code, {}))


# (failure, what the primary answers to every request, whether the turn falls back)
CASES: list[tuple[str, Callable[[], Reply] | None, bool]] = [
    ("timeout (no answer within LLM_TIMEOUT)", lambda: Reply(text="late", delay=3.0), True),
    ("connection refused", None, True),
    ("stream broken before any text", lambda: Reply(cut="close"), True),
    ("HTTP 500", lambda: error(500, kind="server_error"), True),
    ("HTTP 502", lambda: error(502, kind="server_error"), True),
    ("HTTP 503", lambda: error(503, kind="server_error"), True),
    ("HTTP 408", lambda: error(408), True),
    ("HTTP 429 rate limit", lambda: error(429, "rate_limit_exceeded"), True),
    ("HTTP 429 insufficient_quota", lambda: error(429, "insufficient_quota"), True),
    ("HTTP 402 payment required", lambda: error(402), True),
    ("HTTP 401 key refused", lambda: error(401, "invalid_api_key"), True),
    ("HTTP 403 forbidden", lambda: error(403), True),
    ("HTTP 400 malformed request", lambda: error(400), False),
    ("HTTP 400 context_length_exceeded", lambda: error(400, "context_length_exceeded"), False),
    ("HTTP 400 content_filter", lambda: error(400, "content_filter"), False),
    ("HTTP 404 model_not_found", lambda: error(404, "model_not_found"), False),
    ("HTTP 422 unprocessable", lambda: error(422), False),
    ("stream broken after text was shown", lambda: Reply(text=PARTIAL, cut="reset"), False),
]


async def make_core(core_factory: Any, primary_url: str, backup_url: str) -> OrchestratorCore:
    core: OrchestratorCore = await core_factory(
        CRAYFISH_MODELS=presets(primary_url, backup_url),
        CRAYFISH_MODEL_FALLBACKS="backup",
        KEY_A="sk-primary",
        KEY_B="sk-backup",
        CRAYFISH_LLM_RETRIES=1,
        CRAYFISH_LLM_TIMEOUT=0.5,
        CRAYFISH_AUTO_RECALL="false",
    )
    return core


@pytest.mark.parametrize(("failure", "script", "falls_back"), CASES, ids=[c[0] for c in CASES])
async def test_a_provider_failure_falls_back_only_when_it_should(
    core_factory: Any,
    fake_llm: FakeLLM,
    backup: FakeLLM,
    failure: str,
    script: Callable[[], Reply] | None,
    falls_back: bool,
):
    primary_url = fake_llm.base_url if script else f"http://127.0.0.1:{free_port()}/v1"
    if script is not None:
        fake_llm.reply_forever_with(lambda body: script())
    core = await make_core(core_factory, primary_url, backup.base_url)
    turn = await core.turns.wait((await core.submit("s1", "what is the answer?")).id, 30)
    events = await core.turns.store.events.task_events(turn.id, 0)
    served = [e.data.get("model") for e in events if e.type == "llm.response"]
    if falls_back:
        assert (turn.status, turn.result, served) == ("completed", ANSWER, ["backup"]), turn.error
        assert backup.requests[0]["model"] == "m2"
        # The attempt that failed is named in the reply's event, by preset and key variable.
        failed = next(e for e in events if e.type == "llm.response").data["fallbacks"]
        assert failed and failed[0].startswith("primary (KEY_A): ")
        outcome = "fallback: backup answered"
    else:
        assert turn.status == "failed" and not backup.requests, turn.error
        assert "no model could answer" not in (turn.error or "")
        outcome = "no fallback: the turn fails"
    FIGURES.append(
        f"{failure:44} | {outcome:28} | {len(fake_llm.requests):12} | {len(backup.requests):11}"
    )


async def test_when_every_preset_fails_the_error_lists_each_attempt(
    core_factory: Any, fake_llm: FakeLLM, backup: FakeLLM
):
    fake_llm.reply_forever_with(lambda body: error(503, kind="server_error"))
    backup.reply_forever_with(lambda body: error(429, "rate_limit_exceeded"))
    core = await make_core(core_factory, fake_llm.base_url, backup.base_url)
    turn = await core.turns.wait((await core.submit("s2", "hello?")).id, 30)
    assert turn.status == "failed"
    error_text = turn.error or ""
    assert "no model could answer (2 attempts): 1. primary (KEY_A): LLM answered HTTP 503" in (
        error_text
    )
    assert "2. backup (KEY_B): LLM answered HTTP 429" in error_text
    # The failed-turn answer of /v1 is the last attempt's: the provider's rate limit.
    answer = failed_turn(turn)
    assert (answer.status, answer.code) == (429, "llm_rate_limited")
    assert "1. primary" in answer.message and "2. backup" in answer.message


async def test_a_refused_key_rotates_to_the_next_and_cools_down(fake_llm: FakeLLM):
    settings = settings_from_env(
        {
            "CRAYFISH_MODELS": json.dumps(
                [
                    {
                        "name": "p",
                        "base_url": fake_llm.base_url,
                        "model": "m",
                        "api_key_env": ["K1", "K2"],
                    }
                ]
            ),
            "K1": "sk-one",
            "K2": "sk-two",
            "CRAYFISH_LLM_RETRY_BASE_DELAY": 0.01,
        }
    )
    llm = LLMClient(settings)
    try:
        fake_llm.reply(error(429, "rate_limit_exceeded"))
        fake_llm.reply_text("first")
        fake_llm.reply_text("second")
        first = await llm.complete([{"role": "user", "content": "hi"}])
        second = await llm.complete([{"role": "user", "content": "again"}])
    finally:
        await llm.close()
    keys = [h["authorization"] for h in fake_llm.request_headers]
    # The 429 is not waited out on K1 (K2 is there): K2 at once, and K2 again while K1 cools.
    assert keys == ["Bearer sk-one", "Bearer sk-two", "Bearer sk-two"]
    assert (first.content, first.preset, first.failed[0][:9]) == ("first", "p", "p (K1): L")
    assert (second.content, second.failed) == ("second", [])


async def test_a_single_preset_fails_with_its_own_error_as_before(fake_llm: FakeLLM):
    settings = settings_from_env(
        {"OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": "sk", "CRAYFISH_MODEL": "m"}
    )
    llm = LLMClient(settings)
    fake_llm.reply_error(401, "Incorrect API key provided", type="invalid_request_error")
    try:
        with pytest.raises(LLMError) as caught:
            await llm.complete([{"role": "user", "content": "hi"}])
    finally:
        await llm.close()
    assert str(caught.value) == "LLM answered HTTP 401: Incorrect API key provided"
    assert caught.value.status == 401 and len(fake_llm.requests) == 1


def test_key_cooldowns_double_from_a_minute_to_an_hour_and_quota_takes_hours():
    now = [1000.0]
    ring = KeyRing(2, clock=lambda: now[0])
    cooldowns = [ring.failed(0, quota=False) for _ in range(8)]
    assert cooldowns == [60, 120, 240, 480, 960, 1920, MAX_COOLDOWN, MAX_COOLDOWN]
    assert ring.available() == [1]
    assert ring.failed(1, quota=True) == QUOTA_COOLDOWN
    assert ring.available() == [] and ring.soonest() == (0, MAX_COOLDOWN)
    now[0] += MAX_COOLDOWN
    assert ring.available() == [0]
    ring.succeeded(0)
    assert ring.failed(0, quota=False) == 60  # a success starts the doubling over


async def test_a_lone_key_that_cools_down_is_still_used(fake_llm: FakeLLM):
    """With nowhere else to go, a cooling key is tried anyway: one preset never locks up."""
    settings = settings_from_env(
        {
            "OPENAI_BASE_URL": fake_llm.base_url,
            "OPENAI_API_KEY": "sk",
            "CRAYFISH_MODEL": "m",
            "CRAYFISH_LLM_RETRIES": 0,
        }
    )
    llm = LLMClient(settings)
    fake_llm.reply(error(429, "rate_limit_exceeded"))
    fake_llm.reply_text("ok")
    try:
        with pytest.raises(LLMError) as caught:
            await llm.complete([{"role": "user", "content": "hi"}])
        reply = await llm.complete([{"role": "user", "content": "again"}])
    finally:
        await llm.close()
    assert str(caught.value).startswith("LLM answered HTTP 429: scripted 429")
    assert (reply.content, reply.preset, reply.failed) == ("ok", "m", [])


async def test_the_next_request_skips_a_provider_that_just_failed(
    fake_llm: FakeLLM, backup: FakeLLM
):
    """A turn's next round (or the next turn) goes to the fallback first for a while, instead
    of waiting out the failed provider's retries again."""
    fake_llm.reply_forever_with(lambda body: error(503, kind="server_error"))
    settings = settings_from_env(
        {
            "CRAYFISH_MODELS": presets(fake_llm.base_url, backup.base_url),
            "CRAYFISH_MODEL_FALLBACKS": "backup",
            "KEY_A": "sk-a",
            "KEY_B": "sk-b",
            "CRAYFISH_LLM_RETRIES": 1,
            "CRAYFISH_LLM_RETRY_BASE_DELAY": 0.01,
        }
    )
    llm = LLMClient(settings)
    try:
        first = await llm.complete([{"role": "user", "content": "round 1"}])
        second = await llm.complete([{"role": "user", "content": "round 2"}])
    finally:
        await llm.close()
    assert (first.preset, second.preset, second.failed) == ("backup", "backup", [])
    assert (len(fake_llm.requests), len(backup.requests)) == (2, 2)  # 1 + 1 retry, then none
