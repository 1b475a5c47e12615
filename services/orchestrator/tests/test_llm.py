"""LLMClient against the scripted fake LLM: retries, Retry-After, broken streams, deadline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from orchestrator.agent.chat_http import env_proxy
from orchestrator.agent.llm import LLMClient, LLMError, LLMReply

from tests.fakes import FakeLLM, Reply

from .conftest import settings_from_env

USER = [{"role": "user", "content": "what is the answer?"}]
PARTIAL = "The answer is MARK"


def make_client(fake: FakeLLM, **env: object) -> LLMClient:
    values: dict[str, object] = {
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": "sk-test",
        "CRAYFISH_MODEL": "fake-model",
        "CRAYFISH_LLM_RETRY_BASE_DELAY": 0.01,
        **env,
    }
    return LLMClient(settings_from_env(values))


@pytest.fixture
async def llm(fake_llm: FakeLLM) -> AsyncIterator[LLMClient]:
    client = make_client(fake_llm)
    yield client
    await client.close()


async def ask(llm: LLMClient, tools: list[dict[str, Any]] | None = None) -> tuple[Any, str]:
    """(the reply or the LLMError, the text streamed to the user)."""
    shown: list[str] = []

    async def on_delta(text: str) -> None:
        shown.append(text)

    try:
        reply: LLMReply | LLMError = await llm.complete(USER, tools, on_delta)
    except LLMError as exc:
        reply = exc
    return reply, "".join(shown)


def retry_counts(fake: FakeLLM) -> list[str]:
    return [h.get("x-retry-count", "") for h in fake.request_headers]


async def test_a_reply_streams_each_piece_once(llm: LLMClient, fake_llm: FakeLLM):
    text = "one two three four five six seven eight nine ten"
    fake_llm.reply_text(text)
    reply, shown = await ask(llm)
    assert reply.content == shown == text
    assert reply.finish_reason == "stop" and reply.completion_tokens > 0


async def test_half_a_surrogate_pair_arrives_as_a_replacement_character(
    llm: LLMClient, fake_llm: FakeLLM
):
    """JSON can escape a lone surrogate, which no store, page or next request could carry."""
    chunk = '{"choices": [{"index": 0, "delta": {"content": " w\\ud800rld \\ud83e\\udd9e"}}]}'
    fake_llm.reply(Reply(text="Hello", garbage=chunk))
    reply, shown = await ask(llm)
    assert reply.content == shown == "Hello w\ufffdrld \U0001f99e"
    reply.content.encode()  # UTF-8 can carry it


async def test_server_errors_are_retried_with_a_short_backoff(llm: LLMClient, fake_llm: FakeLLM):
    for _ in range(3):
        fake_llm.reply_error(500, "internal error")
    fake_llm.reply_text("made it")
    reply, shown = await ask(llm)
    assert reply.content == shown == "made it"
    assert retry_counts(fake_llm) == ["0", "1", "2", "3"]
    # CRAYFISH_LLM_RETRY_BASE_DELAY=0.01: the default curve would wait 0.5 + 1 + 2 s (-25%).
    waited = fake_llm.request_times[-1] - fake_llm.request_times[0]
    assert waited < 2.0


async def test_retry_after_is_honoured(llm: LLMClient, fake_llm: FakeLLM):
    fake_llm.reply_error(429, "Rate limit reached", type="requests", headers={"retry-after": "0.6"})
    fake_llm.reply_error(503, "overloaded", headers={"retry-after-ms": "300"})
    fake_llm.reply_text("after waiting")
    reply, _ = await ask(llm)
    assert reply.content == "after waiting"
    first, second, third = fake_llm.request_times
    assert second - first >= 0.6 and third - second >= 0.3  # not the 0.01 s backoff


async def test_a_retry_after_beyond_the_cap_fails_at_once(llm: LLMClient, fake_llm: FakeLLM):
    fake_llm.reply_error(429, "Quota exceeded", type="requests", headers={"retry-after": "3600"})
    reply, _ = await ask(llm)
    assert isinstance(reply, LLMError)
    assert str(reply) == "LLM answered HTTP 429: Quota exceeded; it asks to retry after 3600 s"
    assert len(fake_llm.requests) == 1


async def test_a_rejected_key_is_not_retried(llm: LLMClient, fake_llm: FakeLLM):
    fake_llm.reply_error(401, "Incorrect API key provided", type="invalid_request_error")
    fake_llm.reply_text("never asked for")
    reply, shown = await ask(llm)
    assert str(reply) == "LLM answered HTTP 401: Incorrect API key provided"
    assert shown == "" and len(fake_llm.requests) == 1


async def test_exhausted_retries_say_how_many_attempts(fake_llm: FakeLLM):
    llm = make_client(fake_llm, CRAYFISH_LLM_RETRIES=2)
    for _ in range(3):
        fake_llm.reply_error(429, "Rate limit reached", type="requests")
    reply, _ = await ask(llm)
    await llm.close()
    assert str(reply) == "LLM answered HTTP 429: Rate limit reached (gave up after 3 attempts)"


@pytest.mark.parametrize("cut", ["reset", "close", "end"])
async def test_a_stream_cut_after_text_is_never_repeated(
    llm: LLMClient, fake_llm: FakeLLM, cut: str
):
    fake_llm.reply(Reply(text=PARTIAL, cut=cut))  # type: ignore[arg-type]
    fake_llm.reply_text("a second, different answer")
    reply, shown = await ask(llm)
    assert shown == PARTIAL  # once, and nothing else
    assert isinstance(reply, LLMError)
    assert str(reply).startswith(f"the LLM stream broke after {len(PARTIAL)} characters (")
    assert str(reply).endswith("); the unfinished answer shown was not kept: ask again")
    assert len(fake_llm.requests) == 1 and fake_llm.pending == 1


async def test_a_reset_names_its_cause(llm: LLMClient, fake_llm: FakeLLM):
    fake_llm.reply(Reply(text=PARTIAL, cut="reset"))
    reply, _ = await ask(llm)
    assert "connection lost: [Errno 104] Connection reset by peer" in str(reply)


async def test_a_stream_cut_before_any_text_is_restarted(llm: LLMClient, fake_llm: FakeLLM):
    tools = [{"type": "function", "function": {"name": "exec", "parameters": {}}}]
    fake_llm.reply(Reply(tool_calls=[fake_llm.tool_call("exec", {"command": "ls"})], cut="reset"))
    fake_llm.reply(Reply(garbage="<html>502 Bad Gateway</html>"))
    fake_llm.reply_tool_calls(("exec", {"command": "pwd"}))
    reply, shown = await ask(llm, tools)
    assert shown == "" and len(fake_llm.requests) == 3
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("exec", '{"command": "pwd"}')]


async def test_a_restarted_request_gets_its_retries_again(fake_llm: FakeLLM):
    llm = make_client(fake_llm, CRAYFISH_LLM_RETRIES=1)
    fake_llm.reply(Reply(cut="close"))
    fake_llm.reply_error(500, "still broken")
    fake_llm.reply_text("made it")
    reply, shown = await ask(llm)
    await llm.close()
    assert reply.content == shown == "made it"
    assert retry_counts(fake_llm) == ["0", "0", "1"]


async def test_a_stream_that_keeps_breaking_gives_up(fake_llm: FakeLLM):
    llm = make_client(fake_llm, CRAYFISH_LLM_RETRIES=2)
    for _ in range(3):
        fake_llm.reply(Reply(cut="end"))
    reply, _ = await ask(llm)
    await llm.close()
    assert str(reply) == (
        "the LLM stream broke before any text arrived (the stream ended without a "
        "finish_reason) (gave up after 3 attempts)"
    )


@pytest.mark.parametrize(
    ("garbage", "says"),
    [
        ("{not json", "a chunk that is not JSON: '{not json'"),
        ("42", "a chunk that is not a JSON object: 42"),
        ('{"error": {"message": "overloaded"}}', "the provider sent an error: overloaded"),
    ],
)
async def test_a_malformed_chunk_after_text_ends_the_reply_clearly(
    llm: LLMClient, fake_llm: FakeLLM, garbage: str, says: str
):
    fake_llm.reply(Reply(text=PARTIAL, garbage=garbage))
    reply, shown = await ask(llm)
    assert shown == PARTIAL
    assert str(reply).startswith(f"the LLM stream broke after {len(PARTIAL)} characters ({says})")


async def test_a_stalled_stream_or_a_slow_start_times_out(fake_llm: FakeLLM):
    llm = make_client(fake_llm, CRAYFISH_LLM_TIMEOUT=0.3)
    fake_llm.reply(Reply(text=PARTIAL, cut="stall"))
    stalled, shown = await ask(llm)
    assert shown == PARTIAL
    assert str(stalled).startswith(f"the LLM stream broke after {len(PARTIAL)} characters (no data")
    for _ in range(4):
        fake_llm.reply_text("slow", delay=2)  # half of the delay comes before the first byte
    slow, _ = await ask(llm)
    await llm.close()
    assert str(slow) == (
        f"the LLM at {fake_llm.base_url} did not answer within 0.3 s (CRAYFISH_LLM_TIMEOUT) "
        "(gave up after 4 attempts)"
    )


async def test_a_reply_that_never_ends_meets_the_deadline(fake_llm: FakeLLM):
    llm = make_client(fake_llm, CRAYFISH_LLM_DEADLINE=0.5)
    fake_llm.reply(Reply(text=PARTIAL, endless=" and on"))
    reply, shown = await asyncio.wait_for(ask(llm), 10)  # the stream alone would never end
    await llm.close()
    assert shown.startswith(PARTIAL + " and on and on")
    assert str(reply) == (
        f"the LLM reply did not finish within 0.5 s (CRAYFISH_LLM_DEADLINE), {len(shown)} "
        "characters in; the unfinished answer shown was not kept: ask again"
    )


async def test_an_unreachable_llm_names_the_address(fake_llm: FakeLLM):
    llm = make_client(fake_llm, OPENAI_BASE_URL="http://127.0.0.1:9/v1", CRAYFISH_LLM_RETRIES=1)
    reply, _ = await ask(llm)
    await llm.close()
    assert str(reply).startswith("cannot reach the LLM at http://127.0.0.1:9/v1: [Errno 111]")
    assert str(reply).endswith("(gave up after 2 attempts)")


def test_the_proxy_is_the_one_the_environment_names(monkeypatch: pytest.MonkeyPatch):
    for name in (
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1,.lan")
    assert env_proxy("https://api.openai.com/v1/chat/completions") == "http://proxy.internal:3128"
    assert env_proxy("http://127.0.0.1:8080/v1/chat/completions") is None  # NO_PROXY
    assert env_proxy("https://llm.lan/v1/chat/completions") is None
    assert env_proxy("http://models.example/v1/chat/completions") is None  # no HTTP_PROXY
