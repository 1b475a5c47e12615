"""A turn runs once: a failed turn does not invite a retry, and a retry (the openai SDK's, an
Idempotency-Key's, an identical body soon after a failure) gets the first attempt's outcome
instead of running the turn again. Real stack, the real openai SDK at its default retries, an
`exec` that appends a line to a file, a fake provider failing after it."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import pytest

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, Reply
from tests.fakes.completions import ErrorReply
from tests.stacks import print_figures, running_stack

pytestmark = pytest.mark.slow  # starts the whole stack

STACK_ENV = {"CRAYFISH_AUTO_RECALL": "false", "CRAYFISH_LLM_RETRIES": "3"}
LLM_RETRIES = 3  # Crayfish's own retries of a provider's 5xx
FIGURES: list[str] = []


@pytest.fixture(scope="module")
def stack(fake_llm: FakeLLM) -> Iterator[LocalStack]:
    """Two replicas on one store: a retry reaching the other one is still recognised."""
    with running_stack(fake_llm.base_url, env=STACK_ENV, orchestrators=2) as stack:
        yield stack


@pytest.fixture
def other(stack: LocalStack) -> Iterator[httpx.Client]:
    """A client of the second replica (`api` talks to the first)."""
    with httpx.Client(base_url=stack.urls[1], timeout=60) as client:
        yield client


@pytest.fixture(scope="module", autouse=True)
def _figures(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if FIGURES:
        title = "\nA failed turn (case | exec runs | LLM requests | HTTP attempts | client saw):"
        print_figures(request, [title, *FIGURES])


class Marker:
    """A file in the workspace that each run of the scripted `exec` appends one line to."""

    def __init__(self, stack: LocalStack):
        self.name = f"once-{uuid.uuid4().hex[:8]}.txt"
        self.path = Path(stack.workspace) / self.name
        self.command = f"echo ran >> {self.name}"

    @property
    def runs(self) -> int:
        return len(self.path.read_text().splitlines()) if self.path.exists() else 0


def exec_then(fake: FakeLLM, marker: Marker, after: Callable[[], Reply]) -> None:
    """Every turn: the model calls `exec` (appending to the marker), then answers `after()` to
    the tool's result, however many times it is asked (as a real provider would)."""

    def reply(body: dict[str, Any]) -> Reply:
        if body["messages"][-1]["role"] == "tool":
            return after()
        return Reply(tool_calls=[fake.tool_call("exec", {"command": marker.command})])

    fake.reply_forever_with(reply)


def provider_error(status: int, message: str, code: str | None = None) -> Callable[[], Reply]:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return lambda: Reply(error=ErrorReply(status, message, kind, code))


def sdk_client(stack: LocalStack, attempts: list[str], **options: Any) -> openai.OpenAI:
    """The openai SDK at its default retries, counting the HTTP attempts it makes."""
    hooks = {
        "request": [lambda request: attempts.append(request.headers["x-stainless-retry-count"])]
    }
    return openai.OpenAI(
        base_url=f"{stack.url}/v1",
        api_key="unused",
        http_client=httpx2.Client(event_hooks=hooks),
        **options,
    )


def ask(client: openai.OpenAI, text: str) -> Any:
    return client.chat.completions.create(
        model="crayfish", messages=[{"role": "user", "content": text}]
    )


def failed_call(
    stack: LocalStack, fake: FakeLLM, case: str, after: Callable[[], Reply]
) -> tuple[openai.APIStatusError, Marker, int, list[str]]:
    """One SDK call whose turn runs `exec`, then gets `after` from the provider: the error the
    SDK raised, the marker, the LLM requests made and the SDK's attempts (retry counts)."""
    marker, attempts = Marker(stack), []
    exec_then(fake, marker, after)
    before = len(fake.requests)
    with pytest.raises(openai.APIStatusError) as caught:
        ask(sdk_client(stack, attempts), f"append to {marker.name}")
    requests, error = len(fake.requests) - before, caught.value
    FIGURES.append(
        f"{case} | {marker.runs} | {requests} | {len(attempts)}"
        f" | {error.status_code} {error.message}"
    )
    return error, marker, requests, attempts


def test_a_provider_400_after_exec_runs_it_once(stack: LocalStack, fake_llm: FakeLLM):
    too_long = "This model's maximum context length is 8192 tokens"
    refusal = provider_error(400, too_long, "context_length_exceeded")
    error, marker, requests, attempts = failed_call(stack, fake_llm, "provider 400", refusal)
    assert marker.runs == 1
    assert requests == 2  # the exec call, then the request the provider refused
    assert attempts == ["0"]  # the SDK did not retry
    assert isinstance(error, openai.BadRequestError) and error.status_code == 400
    assert too_long in error.message and "1 tool call ran" in error.message
    assert isinstance(error.body, dict) and error.body["code"] == "context_length_exceeded"


def test_a_provider_500_after_exec_runs_it_once(stack: LocalStack, fake_llm: FakeLLM):
    failing = provider_error(500, "The server had an error")
    error, marker, requests, attempts = failed_call(stack, fake_llm, "provider 500", failing)
    assert marker.runs == 1
    assert requests == 1 + 1 + LLM_RETRIES  # the exec call; the failing one, retried by Crayfish
    assert attempts == ["0"]  # the SDK did not retry
    assert error.status_code == 502 and error.response.headers["x-should-retry"] == "false"
    assert "HTTP 500: The server had an error" in error.message
    assert "1 tool call ran" in error.message


def test_a_provider_429_after_exec_is_not_retried_by_the_sdk(stack: LocalStack, fake_llm: FakeLLM):
    limited = provider_error(429, "Rate limit reached for requests")
    error, marker, requests, attempts = failed_call(stack, fake_llm, "provider 429", limited)
    assert marker.runs == 1 and requests == 1 + 1 + LLM_RETRIES
    assert attempts == ["0"]  # a 429 the SDK would retry, but for x-should-retry: false
    assert isinstance(error, openai.RateLimitError)
    assert "Rate limit reached for requests" in error.message


def test_a_rejected_provider_key_does_not_blame_the_clients(stack: LocalStack, fake_llm: FakeLLM):
    fake_llm.reply_error(401, "Incorrect API key provided: sk-te***", type="invalid_request_error")
    attempts: list[str] = []
    with pytest.raises(openai.APIStatusError) as caught:
        ask(sdk_client(stack, attempts), "hello")
    assert not isinstance(caught.value, openai.AuthenticationError)
    assert caught.value.status_code == 424 and attempts == ["0"]
    assert "LLM answered HTTP 401: Incorrect API key provided" in caught.value.message


def api_copy(api: httpx.Client) -> httpx.Client:
    return httpx.Client(base_url=api.base_url, headers=api.headers, timeout=60)


def post_completion(
    api: httpx.Client, body: dict[str, Any], headers: dict[str, str]
) -> httpx.Response:
    return api.post("/v1/chat/completions", json=body, headers=headers, timeout=60)


def test_a_retry_while_the_first_attempt_runs_waits_for_it(
    stack: LocalStack, api: httpx.Client, other: httpx.Client, fake_llm: FakeLLM
):
    marker = Marker(stack)
    before = len(fake_llm.requests)
    fake_llm.reply_tool_calls(("exec", {"command": marker.command}))
    fake_llm.reply_text("Appended once.", delay=2.0)
    body = {"model": "crayfish", "messages": [{"role": "user", "content": marker.name}]}
    first: dict[str, httpx.Response] = {}
    thread = threading.Thread(
        target=lambda: first.update(
            answer=post_completion(api_copy(api), body, {"X-Stainless-Retry-Count": "0"})
        )
    )
    thread.start()
    fake_llm.wait_for_requests(before + 2, timeout=30)  # the exec ran; the answer is coming
    assert not first  # the first attempt still waits for its turn
    retry = post_completion(other, body, {"X-Stainless-Retry-Count": "1"})  # at the other replica
    thread.join(timeout=60)
    assert retry.status_code == 200, retry.text
    assert retry.json()["choices"][0]["message"]["content"] == "Appended once."
    assert retry.json()["id"] == first["answer"].json()["id"]  # the same turn's answer
    assert retry.headers["x-crayfish-replay"] == "true"
    assert marker.runs == 1 and len(fake_llm.requests) - before == 2


def test_the_sdks_retry_after_its_timeout_gets_the_running_turns_answer(
    stack: LocalStack, fake_llm: FakeLLM
):
    """A turn longer than the SDK's timeout: the SDK gives up waiting and sends the request
    again (as it does, at its default timeout, for turns over 10 minutes)."""
    marker, attempts = Marker(stack), []
    before = len(fake_llm.requests)
    fake_llm.reply_tool_calls(("exec", {"command": marker.command}))
    fake_llm.reply_text("Appended once, slowly.", delay=3.0)
    # More retries than the default 2, so that a slow machine still sees the turn end.
    client = sdk_client(stack, attempts, timeout=1.0, max_retries=8)
    reply = ask(client, f"append to {marker.name}")
    assert reply.choices[0].message.content == "Appended once, slowly."
    assert len(attempts) >= 2  # the SDK did time out and retry while the turn ran
    assert marker.runs == 1 and len(fake_llm.requests) - before == 2
    FIGURES.append(f"SDK timeout (1 s) on a 3 s turn | {marker.runs} | 2 | {len(attempts)} | 200")


def stream_events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    for line in response.iter_lines():
        if line.startswith("data: {"):
            yield json.loads(line.removeprefix("data: "))


def test_a_streamed_retry_replays_the_first_attempt(
    stack: LocalStack, api: httpx.Client, other: httpx.Client, fake_llm: FakeLLM
):
    marker = Marker(stack)
    before = len(fake_llm.requests)
    fake_llm.reply_tool_calls(("exec", {"command": marker.command}))
    fake_llm.reply_text("one two three four five", delay=1.0)
    body = {
        "model": "crayfish",
        "stream": True,
        "messages": [{"role": "user", "content": f"append to {marker.name}"}],
    }
    headers = {"X-Stainless-Retry-Count": "0"}
    with api.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response:
        task_id = response.headers["x-crayfish-task"]
        next(stream_events(response))  # the first chunk, then the client drops the connection
    headers = {"X-Stainless-Retry-Count": "1"}
    with other.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response:
        assert response.headers["x-crayfish-task"] == task_id
        chunks = list(stream_events(response))
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "one two three four five"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert marker.runs == 1 and len(fake_llm.requests) - before == 2


def test_an_identical_body_soon_after_a_failure_gets_the_same_failure(
    stack: LocalStack, api: httpx.Client, fake_llm: FakeLLM
):
    marker = Marker(stack)
    exec_then(fake_llm, marker, provider_error(503, "overloaded"))
    body = {"model": "crayfish", "messages": [{"role": "user", "content": marker.name}]}
    before = len(fake_llm.requests)
    first = post_completion(api, body, {})  # a plain client: no SDK header, no key
    assert first.status_code == 502 and first.headers["x-should-retry"] == "false"
    requests = len(fake_llm.requests) - before
    again = post_completion(api, body, {})
    assert again.status_code == 502 and again.headers["x-crayfish-replay"] == "true"
    message = again.json()["error"]["message"]
    assert message.startswith(first.json()["error"]["message"]) and "not run again" in message
    assert again.headers["x-crayfish-task"] == first.headers["x-crayfish-task"]
    assert marker.runs == 1 and len(fake_llm.requests) - before == requests


def test_the_sdk_asking_the_same_again_runs_again(stack: LocalStack, fake_llm: FakeLLM):
    """A new call of the SDK (not its retry) with the same body is a new turn."""
    fake_llm.reply_text("first answer")
    fake_llm.reply_text("second answer")
    client = sdk_client(stack, [])
    assert ask(client, "say something").choices[0].message.content == "first answer"
    assert ask(client, "say something").choices[0].message.content == "second answer"


def test_an_idempotency_key_on_api_chat_returns_the_same_task(
    stack: LocalStack, api: httpx.Client, other: httpx.Client, fake_llm: FakeLLM
):
    marker = Marker(stack)
    before = len(fake_llm.requests)
    fake_llm.reply_tool_calls(("exec", {"command": marker.command}))
    fake_llm.reply_text("Done.", delay=1.0)
    body = {"message": f"append to {marker.name}", "session_id": f"idem-{uuid.uuid4().hex[:8]}"}
    key = {"Idempotency-Key": uuid.uuid4().hex}
    first = api.post("/api/chat", json=body, headers=key)
    assert first.status_code == 202, first.text
    fake_llm.wait_for_requests(before + 1, timeout=30)
    again = other.post("/api/chat", json=body, headers=key)  # while the first still runs
    assert again.status_code == 202 and again.json() == first.json()
    task = wait_task(api, first.json()["task_id"])
    assert task["status"] == "completed" and task["result"] == "Done."
    later = api.post("/api/chat", json=body, headers=key)  # and after it ended
    assert later.json() == first.json()
    assert marker.runs == 1 and len(fake_llm.requests) - before == 2
    history = api.get(f"/api/sessions/{body['session_id']}").json()["messages"]
    assert [m["role"] for m in history].count("user") == 1
    other = api.post("/api/chat", json={**body, "message": "something else"}, headers=key)
    assert other.status_code == 422 and other.json()["error"]["code"] == "idempotency_key_reused"


def wait_task(api: httpx.Client, task_id: str, timeout: float = 30) -> dict[str, Any]:
    with api.stream("GET", f"/api/tasks/{task_id}/events", timeout=timeout) as response:
        for _ in response.iter_lines():
            pass
    return api.get(f"/api/tasks/{task_id}").json()
