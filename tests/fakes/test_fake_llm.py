"""The fake LLM, driven by the official openai SDK the way the orchestrator drives a real one."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.fakes import NO_REPLY_LEFT, FakeLLM, Reply, fixtures

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "exec",
            "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]
USER = [{"role": "user", "content": "hi"}]


fake_llm = fixtures.fake_llm  # the fixture the suite's conftest imports, under test here


@pytest.fixture
def fake(fake_llm: FakeLLM) -> FakeLLM:
    return fake_llm


@pytest.fixture
def client(fake: FakeLLM) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=fake.base_url, api_key="test-key", max_retries=0) as c:
        yield c


def create(client: openai.OpenAI, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    return client.chat.completions.create(model="m", messages=messages, **kwargs)


def call(call_id: str, name: str = "exec", arguments: str = '{"command": "ls"}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant_calls(*ids: str, content: str | None = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": [call(i) for i in ids]}


def tool(call_id: str, content: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def collect_stream(stream: Any) -> tuple[str, dict[int, dict[str, str]], list[Any]]:
    """Reassemble content and tool calls from chunks, as a streaming client does."""
    text, calls, seen = "", {}, []
    for chunk in stream:
        seen.append(chunk)
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for piece in choice.delta.tool_calls or []:
                slot = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] = piece.id or slot["id"]
                if piece.function:
                    slot["name"] += piece.function.name or ""
                    slot["arguments"] += piece.function.arguments or ""
    return text, calls, seen


def test_text_reply_is_a_real_completion(fake: FakeLLM, client: openai.OpenAI) -> None:
    fake.reply_text("Hello there, friend.")
    assert fake.pending == 1
    result = create(client, USER, tools=TOOLS)
    assert result.choices[0].message.content == "Hello there, friend."
    assert result.choices[0].message.tool_calls is None
    assert result.choices[0].finish_reason == "stop"
    assert result.model == "m"
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    assert result.usage.total_tokens == result.usage.prompt_tokens + result.usage.completion_tokens
    assert fake.pending == 0
    assert fake.last_request["tools"] == TOOLS
    assert fake.request_headers[0]["authorization"] == "Bearer test-key"


def test_streamed_text_arrives_in_several_deltas(fake: FakeLLM, client: openai.OpenAI) -> None:
    text = "The quick brown fox jumps over the lazy dog, twice and then once more."
    fake.reply_text(text)
    result, calls, chunks = collect_stream(create(client, USER, stream=True))
    assert result == text
    assert calls == {}
    assert chunks[0].choices[0].delta.role == "assistant"
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 3
    assert [c.choices[0].finish_reason for c in chunks] == [None] * (len(chunks) - 1) + ["stop"]
    assert all(c.usage is None for c in chunks)


def test_tool_calls_non_streamed(fake: FakeLLM, client: openai.OpenAI) -> None:
    ids = fake.reply_tool_calls(("exec", {"command": "echo hi"}), ("read_file", "{bad json"))
    result = create(client, USER, tools=TOOLS)
    message = result.choices[0].message
    assert result.choices[0].finish_reason == "tool_calls"
    assert message.content is None
    assert [c.id for c in message.tool_calls] == ids == ["call_1", "call_2"]
    assert message.tool_calls[0].function.name == "exec"
    assert json.loads(message.tool_calls[0].function.arguments) == {"command": "echo hi"}
    assert message.tool_calls[1].function.arguments == "{bad json"


def test_tool_calls_streamed_reassemble(fake: FakeLLM, client: openai.OpenAI) -> None:
    long_command = "printf '%s\\n' " + " ".join(f"word{i}" for i in range(40))
    fake.reply_tool_calls(
        ("exec", {"command": long_command}), ("list_dir", {"path": "."}), content="Let me look."
    )
    text, calls, chunks = collect_stream(create(client, USER, tools=TOOLS, stream=True))
    assert text == "Let me look."
    assert calls[0]["id"] == "call_1" and calls[1]["id"] == "call_2"
    assert calls[0]["name"] == "exec" and calls[1]["name"] == "list_dir"
    assert json.loads(calls[0]["arguments"]) == {"command": long_command}
    assert json.loads(calls[1]["arguments"]) == {"path": "."}
    argument_pieces = [
        c
        for c in chunks
        if c.choices and c.choices[0].delta.tool_calls and not c.choices[0].delta.tool_calls[0].id
    ]
    assert len(argument_pieces) > 4
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_usage_chunk_when_asked(fake: FakeLLM, client: openai.OpenAI) -> None:
    fake.reply_text(
        "counted", usage={"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    )
    stream = create(client, USER, stream=True, stream_options={"include_usage": True})
    _, _, chunks = collect_stream(stream)
    assert chunks[-1].choices == []
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.total_tokens) == (7, 10)
    # OpenAI's details, 0 where nothing was cached or reasoned.
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens == 0
    assert chunks[-1].usage.completion_tokens_details.reasoning_tokens == 0
    assert chunks[-2].choices[0].finish_reason == "stop"


def test_reasoning_content_is_returned(fake: FakeLLM, client: openai.OpenAI) -> None:
    fake.reply_text("42", reasoning="Think: six times seven.")
    fake.reply_text("43", reasoning="Think again.")
    message = create(client, USER).choices[0].message
    assert message.content == "42"
    assert message.model_extra["reasoning_content"] == "Think: six times seven."
    chunks = list(create(client, USER, stream=True))
    streamed = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks
    )
    assert streamed == "Think again."


def test_valid_multi_round_history_passes(fake: FakeLLM, client: openai.OpenAI) -> None:
    fake.reply_text("done")
    history = [
        {"role": "system", "content": "You are Crayfish."},
        {"role": "user", "content": "look around"},
        assistant_calls("call_1", "call_2"),
        tool("call_2"),
        tool("call_1"),
        assistant_calls("call_3", content="One more."),
        tool("call_3", "file.txt"),
        {"role": "assistant", "content": "Found file.txt."},
        {"role": "user", "content": "thanks"},
    ]
    assert create(client, history, tools=TOOLS).choices[0].message.content == "done"


def test_history_built_from_sdk_messages_passes(fake: FakeLLM, client: openai.OpenAI) -> None:
    """What an orchestrator does: append message.model_dump() and one tool message per call."""
    fake.reply_tool_calls(("exec", {"command": "ls"}), ("exec", {"command": "pwd"}))
    fake.reply_text("Here you go.")
    fake.reply_text("And again.")
    history: list[dict[str, Any]] = [*USER]
    message = create(client, history, tools=TOOLS).choices[0].message
    history.append(message.model_dump())
    history += [tool(c.id, "out") for c in message.tool_calls]
    final = create(client, history, tools=TOOLS).choices[0].message
    history += [final.model_dump(), *USER]
    assert create(client, history, tools=TOOLS).choices[0].message.content == "And again."


ARRAY_OF_ARRAYS = {"type": "array", "items": {"type": "array"}}


def function_tool(parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "t", "parameters": parameters}}


def _rejected_cases() -> list[tuple[str, dict[str, Any], str]]:
    a1 = assistant_calls("call_1", "call_2")
    return [
        ("missing answer", {"messages": [*USER, a1, tool("call_1")]}, "call_2"),
        (
            "missing answer before user",
            {"messages": [*USER, a1, tool("call_1"), *USER]},
            "did not have response messages: call_2",
        ),
        ("unknown id", {"messages": [*USER, a1, tool("call_1"), tool("call_9")]}, "'call_9' not"),
        (
            "id of an older group",
            {"messages": [*USER, assistant_calls("call_0"), tool("call_0"), a1, tool("call_0")]},
            "not found in 'tool_calls'",
        ),
        (
            "duplicate answer",
            {"messages": [*USER, a1, tool("call_1"), tool("call_1"), tool("call_2")]},
            "already answered",
        ),
        ("tool without calls", {"messages": [*USER, tool("call_1")]}, "preceeding message"),
        (
            "tool after plain assistant",
            {"messages": [*USER, {"role": "assistant", "content": "x"}, tool("c")]},
            "preceeding message",
        ),
        (
            "arguments not a string",
            {
                "messages": [
                    *USER,
                    {
                        "role": "assistant",
                        "tool_calls": [
                            dict(call("c"), function={"name": "exec", "arguments": {"a": 1}})
                        ],
                    },
                    tool("c"),
                ]
            },
            "expected a string",
        ),
        (
            "empty tool_calls",
            {"messages": [*USER, {"role": "assistant", "content": "x", "tool_calls": []}]},
            "empty array",
        ),
        ("bad role", {"messages": [{"role": "robot", "content": "x"}]}, "Invalid value: 'robot'"),
        (
            "tools without function",
            {"messages": USER, "tools": [{"type": "function", "name": "exec"}]},
            "tools[0].function.name",
        ),
        (
            "tools wrong type",
            {"messages": USER, "tools": [{"type": "code", "function": {"name": "x"}}]},
            "Supported values are: 'function'",
        ),
        ("empty tools", {"messages": USER, "tools": []}, "empty array"),
        (
            "array without items",
            {"messages": USER, "tools": [function_tool({"properties": {"v": ARRAY_OF_ARRAYS}})]},
            "In context=('properties', 'v', 'items'), array schema missing items.",
        ),
        (
            "root anyOf",
            {"messages": USER, "tools": [function_tool({"type": "object", "anyOf": [{}]})]},
            "not have 'oneOf'/'anyOf'/'allOf'/'enum'/'const'/'not' at the top level",
        ),
        (
            "root not an object",
            {"messages": USER, "tools": [function_tool({"type": "array", "items": {}})]},
            """must be a JSON Schema of 'type: "object"', got 'type: "array"'""",
        ),
        (
            "reasoning_content sent back",
            {
                "messages": [
                    *USER,
                    {"role": "assistant", "content": "a", "reasoning_content": "r"},
                    *USER,
                ]
            },
            "reasoning_content",
        ),
        (
            "tool content null",
            {"messages": [*USER, a1, tool("call_1"), tool("call_2", None)]},
            "got null",
        ),
    ]


@pytest.mark.parametrize(
    ("case", "kwargs", "expected"), _rejected_cases(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_rejected_requests_do_not_consume_a_reply(
    fake: FakeLLM, client: openai.OpenAI, case: str, kwargs: dict[str, Any], expected: str
) -> None:
    fake.reply_text("still here")
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="m", **kwargs)
    assert info.value.status_code == 400
    assert expected in info.value.body["message"], info.value.body
    assert info.value.body["type"] == "invalid_request_error"
    assert fake.pending == 1
    assert (
        len(fake.requests) == 1
        and fake.rejections[0]["error"]["message"] == info.value.body["message"]
    )
    assert create(client, USER).choices[0].message.content == "still here"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"{not json", "could not parse the JSON body"),
        (json.dumps({"messages": USER}).encode(), "you must provide a model parameter"),
        (json.dumps({"model": "m"}).encode(), "Missing required parameter: 'messages'"),
        (json.dumps({"model": "m", "messages": []}).encode(), "empty array"),
    ],
)
def test_malformed_bodies_are_rejected(fake: FakeLLM, body: bytes, expected: str) -> None:
    fake.reply_text("unused")
    response = httpx.post(
        fake.base_url + "/chat/completions",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert expected in response.json()["error"]["message"]
    assert fake.pending == 1 and len(fake.requests) == 1


def test_strict_content_emulates_llama_cpp() -> None:
    with (
        FakeLLM(strict_content=True) as strict,
        openai.OpenAI(base_url=strict.base_url, api_key="k", max_retries=0) as strict_client,
    ):
        strict.reply_text("fine")
        history = [*USER, assistant_calls("call_1"), tool("call_1")]
        with pytest.raises(openai.InternalServerError):
            create(strict_client, history)
        assert strict.pending == 1
        history[1] = assistant_calls("call_1", content="")
        assert create(strict_client, history).choices[0].message.content == "fine"


def test_reasoning_content_allowed_when_configured() -> None:
    with (
        FakeLLM(reject_reasoning_content=False) as lenient,
        openai.OpenAI(base_url=lenient.base_url, api_key="k", max_retries=0) as lenient_client,
    ):
        lenient.reply_text("ok")
        history = [*USER, {"role": "assistant", "content": "a", "reasoning_content": "r"}, *USER]
        assert create(lenient_client, history).choices[0].message.content == "ok"


def test_empty_queue_fails_clearly_without_sdk_retries(fake: FakeLLM) -> None:
    # default max_retries=2: the fake tells the SDK not to retry, so the test fails at once
    with (
        openai.OpenAI(base_url=fake.base_url, api_key="k") as retrying,
        pytest.raises(openai.InternalServerError) as info,
    ):
        create(retrying, USER)
    assert NO_REPLY_LEFT in str(info.value)
    assert len(fake.requests) == 1


def test_scripted_errors_and_computed_replies(fake: FakeLLM, client: openai.OpenAI) -> None:
    fake.reply_error(429, "Rate limit reached", type="requests", code="rate_limit_exceeded")
    fake.reply_with(lambda body: Reply(text="echo: " + body["messages"][-1]["content"]))
    fake.reply_with(lambda body: Reply(tool_calls=[fake.tool_call("exec", {"command": "pwd"})]))
    with pytest.raises(openai.RateLimitError) as info:
        create(client, USER)
    assert info.value.code == "rate_limit_exceeded"
    assert create(client, USER).choices[0].message.content == "echo: hi"
    assert create(client, USER).choices[0].message.tool_calls[0].id == "call_1"
    fake.reply_forever_text("again")
    assert [create(client, USER).choices[0].message.content for _ in range(2)] == ["again"] * 2


def test_models_endpoint(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["fake-model"]


def test_concurrent_delayed_requests_are_all_answered(fake: FakeLLM) -> None:
    for i in range(4):
        fake.reply_text(f"answer {i}", delay=0.2)
    results: list[str] = []

    def ask() -> None:
        with openai.OpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as c:
            text, _, _ = collect_stream(create(c, USER, stream=True))
            results.append(text)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    assert fake.wait_for_requests(4)["messages"] == USER
    for t in threads:
        t.join(timeout=10)
    assert sorted(results) == [f"answer {i}" for i in range(4)]


async def test_async_client_streams_tool_calls(fake: FakeLLM) -> None:
    fake.reply_tool_calls(("exec", {"command": "echo hi"}), delay=0.1)
    async with openai.AsyncOpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as c:
        stream = await c.chat.completions.create(model="m", messages=USER, tools=TOOLS, stream=True)
        calls: dict[int, str] = {}
        async for chunk in stream:
            for piece in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
                calls[piece.index] = calls.get(piece.index, "") + (piece.function.arguments or "")
    assert json.loads(calls[0]) == {"command": "echo hi"}


def streamed_until_error(client: openai.OpenAI) -> tuple[str, Exception | None]:
    """(the content that arrived, the error that ended the stream, if any)."""
    text = ""
    try:
        for chunk in create(client, USER, stream=True):
            for choice in chunk.choices:
                text += choice.delta.content or ""
    except Exception as exc:
        return text, exc
    return text, None


@pytest.mark.parametrize(
    ("cut", "error"),
    [("reset", "Connection reset by peer"), ("close", "incomplete chunked read"), ("end", None)],
)
def test_a_stream_can_break_after_its_text(
    fake: FakeLLM, client: openai.OpenAI, cut: str, error: str | None
) -> None:
    fake.reply(Reply(text="The answer is MARK", cut=cut))  # type: ignore[arg-type]
    fake.reply_text("the fake still answers")
    text, exc = streamed_until_error(client)
    assert text == "The answer is MARK"
    if error is None:
        assert exc is None  # a clean end, but no finish_reason and no [DONE]
    else:
        assert isinstance(exc, openai.APIConnectionError)
        chain = []
        while exc is not None:
            chain.append(str(exc))
            exc = exc.__cause__ or exc.__context__
        assert any(error in link for link in chain), chain
    assert streamed_until_error(client) == ("the fake still answers", None)


def test_a_stream_can_stall_or_never_end(fake: FakeLLM) -> None:
    fake.reply(Reply(text="Wait", cut="stall"))
    fake.reply(Reply(text="Again", endless=" and again"))
    with openai.OpenAI(base_url=fake.base_url, api_key="k", max_retries=0, timeout=0.3) as c:
        assert streamed_until_error(c)[0] == "Wait"  # then a read timeout
        pieces = []
        for chunk in create(c, USER, stream=True):
            pieces.append(chunk.choices[0].delta.content or "")
            if len(pieces) > 20:
                break
    assert "".join(pieces).startswith("Again and again and again")


def test_a_malformed_chunk_is_sent_verbatim(fake: FakeLLM, client: openai.OpenAI) -> None:
    fake.reply(Reply(text="Half", garbage="{not json"))
    text, exc = streamed_until_error(client)
    assert text == "Half" and isinstance(exc, json.JSONDecodeError) and exc.doc == "{not json"


def test_error_headers_reach_the_sdk_which_honours_retry_after(fake: FakeLLM) -> None:
    fake.reply_error(429, "Rate limit reached", type="requests", headers={"retry-after": "0.5"})
    fake.reply_text("after the wait")
    with openai.OpenAI(base_url=fake.base_url, api_key="k", max_retries=1) as retrying:
        assert create(retrying, USER).choices[0].message.content == "after the wait"
    assert fake.request_times[1] - fake.request_times[0] >= 0.5


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"temperature": "hot"}, "Invalid type for 'temperature': expected a decimal"),
        ({"temperature": 3}, "Expected a value <= 2, but got 3 instead."),
        ({"top_p": True}, "Invalid type for 'top_p': expected a decimal, but got a boolean"),
        ({"max_tokens": 0}, "Expected a value >= 1, but got 0 instead."),
        ({"max_completion_tokens": 1.5}, "expected an integer, but got a decimal"),
        ({"seed": "7"}, "Invalid type for 'seed': expected an integer, but got a string"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "array too long"),
        ({"stop": 5}, "expected one of a string or array of strings"),
        ({"response_format": {"type": "xml"}}, "Supported values are: 'json_object'"),
        ({"response_format": {"type": "json_object"}}, "must contain the word 'json'"),
        ({"response_format": {"type": "json_schema"}}, "'response_format.json_schema'"),
        ({"tool_choice": "required"}, "only allowed when 'tools' are specified"),
        (
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "x"}}},
            "function 'x' is not among the 'tools'",
        ),
    ],
)
def test_parameters_are_checked_as_openai_checks_them(
    fake: FakeLLM, params: dict[str, Any], message: str
) -> None:
    fake.reply_text("never sent")
    body = {"model": "m", "messages": USER, **params}
    answer = httpx.post(f"{fake.base_url}/chat/completions", json=body)
    assert answer.status_code == 400
    assert message in answer.json()["error"]["message"]
    assert fake.pending == 1  # refused before a reply was used


def test_valid_parameters_pass(fake: FakeLLM, client: openai.OpenAI) -> None:
    fake.reply_text('{"ok": true}')
    schema = {"name": "Answer", "schema": {"type": "object", "properties": {}}}
    reply = create(
        client,
        [{"role": "user", "content": "answer in JSON"}],
        temperature=0.2,
        top_p=1,
        max_tokens=50,
        stop=["\n\n"],
        seed=7,
        response_format={"type": "json_schema", "json_schema": schema},
    )
    assert reply.choices[0].message.content == '{"ok": true}'
