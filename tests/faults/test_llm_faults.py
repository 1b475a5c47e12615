"""LLM faults on the real stack: errors, Retry-After, timeouts, cut and malformed streams, an empty
reply, a reply that never ends. Each checks what the user sees and that the next turn works."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from orchestrator.agent.turn_context import without_turn_context

from tests.fakes import FakeLLM, Reply
from tests.stacks import print_figures

pytestmark = pytest.mark.slow  # starts the whole stack

TIMEOUT, RETRIES, DEADLINE = 1.0, 2, 4.0
STACK_ENV = {
    "CRAYFISH_LLM_TIMEOUT": str(TIMEOUT),
    "CRAYFISH_LLM_RETRIES": str(RETRIES),
    "CRAYFISH_LLM_DEADLINE": str(DEADLINE),
    "CRAYFISH_AUTO_RECALL": "false",
}
PARTIAL = "The answer is MARK"
TURN_LIMIT = 30.0  # seconds before a test gives up on a turn that never ends
FIGURES: list[tuple[str, str, str, str]] = []  # fault, what the user saw, survived, seconds


@pytest.fixture(scope="module", autouse=True)
def _figures(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if FIGURES:
        title = "\nLLM faults (fault | what the user saw | next turn works | s):"
        print_figures(request, [title, *(" | ".join(row) for row in FIGURES)])


@dataclass
class Turn:
    task: dict[str, Any]  # GET /api/tasks/{id} once it ended
    streamed: str  # every assistant.delta, joined: what the page and the CLI showed
    seconds: float
    requests: int  # LLM requests this turn made

    @property
    def saw(self) -> str:
        if self.task["status"] == "completed":
            return repr(self.task["result"])
        if not self.streamed:
            return f"failed: {self.task['error']}"
        text = self.streamed if len(self.streamed) <= 24 else self.streamed[:24] + "…"
        return f"{text!r} then failed: {self.task['error']}"


def turn(api: httpx.Client, fake: FakeLLM, session: str, message: str = "what is it?") -> Turn:
    """One turn through POST /api/chat, followed on its SSE event stream to the end."""
    before, started = len(fake.requests), time.monotonic()
    accepted = api.post("/api/chat", json={"message": message, "session_id": session})
    assert accepted.status_code == 202, accepted.text
    task_id = accepted.json()["task_id"]
    deltas = []
    with api.stream("GET", f"/api/tasks/{task_id}/events") as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line.removeprefix("data: "))
                if event["type"] == "assistant.delta":
                    deltas.append(event["text"])
            if time.monotonic() - started > TURN_LIMIT:  # deltas may keep the stream busy
                raise AssertionError(f"the turn did not end within {TURN_LIMIT} s")
    task = api.get(f"/api/tasks/{task_id}").json()
    elapsed = time.monotonic() - started
    return Turn(task, "".join(deltas), elapsed, len(fake.requests) - before)


def next_turn_works(api: httpx.Client, fake: FakeLLM, session: str, fault: Turn) -> bool:
    """The same session answers again, and its history kept no half-written reply."""
    fake.reply_text("Back to normal.")
    after = turn(api, fake, session, "are you there?")
    assert (after.task["status"], after.streamed) == ("completed", "Back to normal."), after.task
    sent = fake.last_request["messages"]  # the fake would have refused a broken history
    assert sent[-1]["role"] == "user"
    assert without_turn_context(sent[-1]["content"]) == "are you there?"
    history = api.get(f"/api/sessions/{session}").json()["messages"]
    assert history[-1] == {"role": "assistant", "content": "Back to normal."}
    if fault.streamed and fault.task["status"] == "failed":
        kept = [m.get("content") or "" for m in history if m["role"] == "assistant"]
        assert not any(fault.streamed in content for content in kept), history
    return True


def record(fault: str, result: Turn, survived: bool) -> None:
    FIGURES.append((fault, result.saw, "yes" if survived else "no", f"{result.seconds:.2f}"))


def new_session() -> str:
    return f"fault-{uuid.uuid4().hex[:8]}"


def test_a_rejected_key_fails_at_once_with_the_providers_words(
    api: httpx.Client, fake_llm: FakeLLM
):
    session = new_session()
    fake_llm.reply_error(
        401, "Incorrect API key provided: sk-te***", type="invalid_request_error", code="bad_key"
    )
    result = turn(api, fake_llm, session)
    assert result.task["status"] == "failed"
    assert result.task["error"] == "LLM answered HTTP 401: Incorrect API key provided: sk-te***"
    assert result.requests == 1 and result.streamed == ""
    record("401 bad key", result, next_turn_works(api, fake_llm, session, result))


def test_a_rate_limit_waits_for_retry_after_then_answers(api: httpx.Client, fake_llm: FakeLLM):
    session = new_session()
    fake_llm.reply_error(429, "Rate limit reached", type="requests", headers={"retry-after": "1"})
    fake_llm.reply_text("Here is the answer after the wait.")
    result = turn(api, fake_llm, session)
    assert result.task["status"] == "completed"
    assert result.streamed == "Here is the answer after the wait."
    assert result.requests == 2
    assert fake_llm.request_headers[-1]["x-retry-count"] == "1"
    waited = fake_llm.request_times[-1] - fake_llm.request_times[-2]
    assert waited >= 1.0  # the backoff alone would be ~0.01 s here
    survived = next_turn_works(api, fake_llm, session, result)
    record(f"429, Retry-After: 1 (retried after {waited:.2f} s)", result, survived)


def test_a_server_error_is_retried_unseen(api: httpx.Client, fake_llm: FakeLLM):
    session = new_session()
    fake_llm.reply_error(500, "The server had an error while processing your request.")
    fake_llm.reply_text("Answered on the second try.")
    result = turn(api, fake_llm, session)
    assert (result.task["status"], result.streamed) == ("completed", "Answered on the second try.")
    assert result.requests == 2
    record("500 then success", result, next_turn_works(api, fake_llm, session, result))


def test_a_slow_start_is_retried_and_endless_slowness_fails_clearly(
    api: httpx.Client, fake_llm: FakeLLM
):
    session = new_session()
    fake_llm.reply_text("too late", delay=4 * TIMEOUT)  # half the delay before the first byte
    fake_llm.reply_text("On time.")
    recovered = turn(api, fake_llm, session)
    assert (recovered.task["status"], recovered.streamed) == ("completed", "On time.")
    assert recovered.requests == 2
    record("read timeout once, then success", recovered, True)
    for _ in range(RETRIES + 1):
        fake_llm.reply_text("too late", delay=4 * TIMEOUT)
    failed = turn(api, fake_llm, session)
    assert failed.task["status"] == "failed" and failed.streamed == ""
    assert failed.task["error"] == (
        f"the LLM at {fake_llm.base_url} did not answer within {TIMEOUT:g} s "
        f"(CRAYFISH_LLM_TIMEOUT) (gave up after {RETRIES + 1} attempts)"
    )
    record("read timeout on every attempt", failed, next_turn_works(api, fake_llm, session, failed))


def test_a_stream_reset_midway_shows_the_text_once_and_fails_clearly(
    api: httpx.Client, fake_llm: FakeLLM
):
    session = new_session()
    fake_llm.reply(Reply(text=PARTIAL, cut="reset"))
    fake_llm.reply_text("A full answer that must not be fetched by a retry.")
    result = turn(api, fake_llm, session)
    assert result.streamed == PARTIAL  # exactly once, and nothing else
    assert result.task["status"] == "failed" and result.requests == 1
    assert result.task["error"].startswith(
        f"the LLM stream broke after {len(PARTIAL)} characters "
        "(connection lost: [Errno 104] Connection reset by peer); "
    )
    fake_llm.reset()
    record("stream reset after 4 deltas", result, next_turn_works(api, fake_llm, session, result))


def test_a_stream_reset_midway_on_the_openai_endpoint(api: httpx.Client, fake_llm: FakeLLM):
    session, started = new_session(), time.monotonic()
    fake_llm.reply(Reply(text=PARTIAL, cut="reset"))
    body = {"model": "crayfish", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    contents, tail = [], []
    headers = {"X-Crayfish-Session": session}
    with api.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response:
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            data = line.removeprefix("data: ")
            chunk = json.loads(data) if data != "[DONE]" else data
            if isinstance(chunk, dict) and chunk.get("choices"):
                contents.append(chunk["choices"][0]["delta"].get("content") or "")
            else:
                tail.append(chunk)
    assert "".join(contents) == PARTIAL
    error, done = tail
    assert done == "[DONE]"
    assert error["error"]["message"].startswith(
        f"the turn failed: the LLM stream broke after {len(PARTIAL)} characters"
    )
    seconds = time.monotonic() - started
    fake_llm.reply_text("Back again.")
    again = api.post("/v1/chat/completions", json={**body, "stream": False}, headers=headers)
    assert again.json()["choices"][0]["message"]["content"] == "Back again."
    saw = f"{PARTIAL!r} then an error chunk: {error['error']['message']}"
    FIGURES.append(("stream reset, on /v1/chat/completions", saw, "yes", f"{seconds:.2f}"))


def test_a_stream_cut_before_any_text_is_restarted_unseen(api: httpx.Client, fake_llm: FakeLLM):
    session = new_session()
    fake_llm.reply(Reply(cut="close"))
    fake_llm.reply_text("The whole answer.")
    result = turn(api, fake_llm, session)
    assert (result.task["status"], result.streamed) == ("completed", "The whole answer.")
    assert result.requests == 2
    record("stream closed before any text", result, next_turn_works(api, fake_llm, session, result))


def test_a_malformed_chunk_midway_fails_clearly(api: httpx.Client, fake_llm: FakeLLM):
    session = new_session()
    fake_llm.reply(Reply(text=PARTIAL, garbage='{"choices": [{"delta": {"content": "tru'))
    result = turn(api, fake_llm, session)
    assert result.streamed == PARTIAL and result.task["status"] == "failed"
    assert result.task["error"].startswith(
        f"the LLM stream broke after {len(PARTIAL)} characters (a chunk that is not JSON: "
    )
    record("malformed chunk after text", result, next_turn_works(api, fake_llm, session, result))


def test_a_malformed_chunk_before_any_text_is_restarted(api: httpx.Client, fake_llm: FakeLLM):
    session = new_session()
    fake_llm.reply(Reply(garbage="<html><body>502 Bad Gateway</body></html>"))
    fake_llm.reply_text("Fine now.")
    result = turn(api, fake_llm, session)
    assert (result.task["status"], result.streamed) == ("completed", "Fine now.")
    record("malformed chunk before text", result, next_turn_works(api, fake_llm, session, result))


def test_an_empty_reply_is_asked_again_then_explained(api: httpx.Client, fake_llm: FakeLLM):
    session = new_session()
    fake_llm.reply_text("")
    fake_llm.reply_text("")
    result = turn(api, fake_llm, session)
    explained = "(The model returned an empty reply twice; try rephrasing the request.)"
    assert (result.task["status"], result.streamed) == ("completed", explained)
    assert result.requests == 2
    assert "Your last reply was empty" in fake_llm.last_request["messages"][-1]["content"]
    record("empty reply, twice", result, next_turn_works(api, fake_llm, session, result))


def test_a_reply_that_never_ends_is_stopped_by_the_deadline(api: httpx.Client, fake_llm: FakeLLM):
    session = new_session()
    fake_llm.reply(Reply(text="Let me think", endless=" and think"))
    result = turn(api, fake_llm, session)
    assert result.streamed.startswith("Let me think and think and think")
    assert result.task["status"] == "failed" and result.requests == 1
    assert re.fullmatch(
        rf"the LLM reply did not finish within {DEADLINE:g} s \(CRAYFISH_LLM_DEADLINE\), \d+ "
        r"characters in; the unfinished answer shown was not kept: ask again",
        result.task["error"],
    )
    assert DEADLINE <= result.seconds < DEADLINE + 10
    record("reply that never ends", result, next_turn_works(api, fake_llm, session, result))
