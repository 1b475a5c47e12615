"""/v1 as the clients people use drive it (the openai SDK, langchain-openai, `llm`), on the
real stack with the fake LLM: the client's instructions, parameters and tools reach the model,
a provider's refusal comes back as it said it, and a conversation stays one session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, Reply
from tests.stacks import wait_task

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture
def sdk(stack: LocalStack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.url}/v1", api_key="unused", max_retries=0)


def sessions(api: httpx.Client) -> dict[str, int]:
    """Each session's id and message count."""
    return {s["id"]: s["messages"] for s in api.get("/api/sessions").json()["sessions"]}


def system_of(body: dict[str, Any]) -> str:
    return body["messages"][0]["content"]


def roles(body: dict[str, Any]) -> list[str]:
    return [m["role"] for m in body["messages"]]


def test_the_clients_system_message_follows_crayfishs_own_prompt(
    sdk: openai.OpenAI, fake_llm: FakeLLM
):
    fake_llm.reply_forever_text("Arr.")
    sdk.chat.completions.create(model="crayfish", messages=[{"role": "user", "content": "hi"}])
    sdk.chat.completions.create(
        model="crayfish",
        messages=[
            {"role": "system", "content": "Answer like a pirate."},
            {"role": "developer", "content": "Never name the ship."},
            {"role": "user", "content": "hi"},
        ],
    )
    plain, instructed = (system_of(r) for r in fake_llm.requests[-2:])
    assert instructed.startswith(plain)  # Crayfish's prompt is the same leading bytes
    section = instructed[len(plain) :]
    assert section.startswith("\n\n## Instructions from the client app\n")
    assert "Answer like a pirate.\n\nNever name the ship." in section
    assert roles(fake_llm.requests[-1]) == ["system", "user"]  # one system message


def test_sampling_parameters_and_response_format_reach_the_provider(
    sdk: openai.OpenAI, fake_llm: FakeLLM
):
    fake_llm.reply_text('{"city": "Lisbon"}')
    schema = {
        "name": "Place",
        "schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    asked = {
        "temperature": 0.3,
        "top_p": 0.9,
        "max_tokens": 77,
        "stop": ["\n\n"],
        "seed": 42,
        "response_format": {"type": "json_schema", "json_schema": schema},
    }
    reply = sdk.chat.completions.create(
        model="crayfish", messages=[{"role": "user", "content": "where?"}], **asked
    )
    assert reply.choices[0].message.content == '{"city": "Lisbon"}'
    sent = fake_llm.last_request
    assert {k: sent.get(k) for k in asked} == asked
    fake_llm.reply_text("{}")
    sdk.chat.completions.create(
        model="crayfish",
        messages=[{"role": "user", "content": "reply in json"}],
        max_completion_tokens=9,
        response_format={"type": "json_object"},
    )
    assert fake_llm.last_request["max_completion_tokens"] == 9
    assert fake_llm.last_request["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize("stream", [False, True])
def test_a_parameter_the_provider_refuses_comes_back_as_it_said(
    sdk: openai.OpenAI, fake_llm: FakeLLM, stream: bool
):
    fake_llm.reply_text("never sent")
    with pytest.raises(openai.BadRequestError) as caught:
        result = sdk.chat.completions.create(
            model="crayfish",
            messages=[{"role": "user", "content": "hi"}],
            temperature=5,
            stream=stream,
        )
        list(result) if stream else None
    assert caught.value.status_code == 400
    assert caught.value.body == {
        "message": "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, "
        "but got 5 instead.",
        "type": "invalid_request_error",
        "code": "decimal_above_max_value",
        "param": "temperature",
    }
    assert fake_llm.pending == 1  # the provider refused it: no reply was used


def test_the_openai_sdk_tool_loop_gets_the_clients_calls_and_never_crayfishs(
    sdk: openai.OpenAI, fake_llm: FakeLLM, api: httpx.Client
):
    fake_llm.reply_tool_calls(("exec", {"command": "echo in-the-sandbox"}))
    fake_llm.reply_tool_calls(("get_weather", {"city": "Lisbon"}), content="Checking.")
    fake_llm.reply_with(lambda body: Reply(text="It is " + body["messages"][-1]["content"]))
    messages: list[Any] = [{"role": "user", "content": "weather in Lisbon?"}]
    first = sdk.chat.completions.with_raw_response.create(
        model="crayfish", messages=messages, tools=[WEATHER]
    )
    reply = first.parse()
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert [
        (c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls
    ] == [("get_weather", {"city": "Lisbon"})]
    # The openai SDK's tool loop: the answer message as it came, then the tool's result.
    messages += [
        choice.message,
        {"role": "tool", "tool_call_id": choice.message.tool_calls[0].id, "content": "sunny, 24 C"},
    ]
    second = sdk.chat.completions.with_raw_response.create(
        model="crayfish", messages=messages, tools=[WEATHER]
    )
    assert second.parse().choices[0].message.content == "It is sunny, 24 C"
    assert second.parse().choices[0].finish_reason == "stop"
    session = first.headers["x-crayfish-session"]
    assert second.headers["x-crayfish-session"] == session
    last = fake_llm.last_request
    assert roles(last)[-4:] == ["assistant", "tool", "assistant", "tool"]
    assert "in-the-sandbox" in last["messages"][-3]["content"]  # exec ran server-side
    assert {t["function"]["name"] for t in last["tools"]} >= {"exec", "get_weather"}
    history = api.get(f"/api/sessions/{session}").json()["messages"]
    assert [m["role"] for m in history] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]


def test_calls_of_both_kinds_in_one_round_run_crayfishs_and_hand_over_the_clients(
    sdk: openai.OpenAI, fake_llm: FakeLLM
):
    fake_llm.reply_tool_calls(
        ("exec", {"command": "echo mixed"}), ("get_weather", {"city": "Oslo"})
    )
    fake_llm.reply_text("Done.")
    messages: list[Any] = [{"role": "user", "content": "both"}]
    reply = sdk.chat.completions.create(model="crayfish", messages=messages, tools=[WEATHER])
    calls = reply.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["get_weather"]
    messages += [
        reply.choices[0].message,
        {"role": "tool", "tool_call_id": calls[0].id, "content": "snow"},
    ]
    assert (
        sdk.chat.completions.create(model="crayfish", messages=messages, tools=[WEATHER])
        .choices[0]
        .message.content
        == "Done."
    )
    group = fake_llm.last_request["messages"][-3:]
    assert [m["role"] for m in group] == ["assistant", "tool", "tool"]
    assert len(group[0]["tool_calls"]) == 2
    assert "mixed" in group[1]["content"] and group[2]["content"] == "snow"


def test_streamed_tool_calls_have_openais_chunk_shape(sdk: openai.OpenAI, fake_llm: FakeLLM):
    fake_llm.reply_tool_calls(("get_weather", {"city": "Rome"}))
    with sdk.chat.completions.stream(
        model="crayfish", messages=[{"role": "user", "content": "Rome?"}], tools=[WEATHER]
    ) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather" and call.function.parsed_arguments is None
    assert json.loads(call.function.arguments) == {"city": "Rome"} and call.id


def test_a_client_tool_named_like_crayfishs_own_is_refused(sdk: openai.OpenAI, api: httpx.Client):
    before = sessions(api)
    exec_tool = {"type": "function", "function": {"name": "exec", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(
            model="crayfish", messages=[{"role": "user", "content": "x"}], tools=[exec_tool]
        )
    assert "'exec' is the name of one of Crayfish's own tools" in caught.value.message
    assert sessions(api) == before  # nothing was started


def test_a_conversation_resent_whole_stays_one_session(
    sdk: openai.OpenAI, fake_llm: FakeLLM, api: httpx.Client
):
    fake_llm.reply_with(lambda body: Reply(text=f"answer {len(body['messages'])}"))
    fake_llm.reply_with(lambda body: Reply(text=f"answer {len(body['messages'])}"))
    fake_llm.reply_with(lambda body: Reply(text=f"answer {len(body['messages'])}"))
    before = sessions(api)
    messages: list[Any] = [{"role": "system", "content": "Be brief."}]
    for question in ("one", "two", "three"):
        messages.append({"role": "user", "content": question})
        reply = sdk.chat.completions.create(model="crayfish", messages=messages)
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
    new = {k: v for k, v in sessions(api).items() if k not in before}
    assert list(new.values()) == [6]  # one session: three questions, three answers
    assert [m["content"] for m in messages[2::2]] == ["answer 2", "answer 4", "answer 6"]


def langchain_chat(stack: LocalStack) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="crayfish", base_url=f"{stack.url}/v1", api_key="unused", max_retries=0)


@pytest.mark.parametrize("stream", [False, True])
def test_langchain_bind_tools_round_trip_in_one_session(
    stack: LocalStack, fake_llm: FakeLLM, api: httpx.Client, stream: bool
):
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city now."""
        raise AssertionError("the test plays the tool's part")

    fake_llm.reply_tool_calls(("get_weather", {"city": "Paris"}))
    fake_llm.reply_with(lambda body: Reply(text="It is " + body["messages"][-1]["content"]))
    before = sessions(api)
    bound = langchain_chat(stack).bind_tools([get_weather])

    def invoke(messages: list[Any]) -> Any:
        if not stream:
            return bound.invoke(messages)
        chunks = list(bound.stream(messages))
        total = chunks[0]
        for chunk in chunks[1:]:
            total += chunk
        return total

    question = HumanMessage("weather in Paris?")
    asked = invoke([question])
    assert [(c["name"], c["args"]) for c in asked.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    result = ToolMessage("rain", tool_call_id=asked.tool_calls[0]["id"])
    assert invoke([question, asked, result]).content == "It is rain"
    new = {k: v for k, v in sessions(api).items() if k not in before}
    assert list(new.values()) == [4]  # user, assistant(call), tool, assistant


def test_langchain_structured_output_by_json_schema_and_by_function_calling(
    stack: LocalStack, fake_llm: FakeLLM
):
    from pydantic import BaseModel

    class Place(BaseModel):
        city: str
        country: str

    chat = langchain_chat(stack)
    fake_llm.reply_text('{"city": "Lisbon", "country": "Portugal"}')
    place = chat.with_structured_output(Place).invoke("Where is the Tagus estuary?")
    assert place == Place(city="Lisbon", country="Portugal")
    assert fake_llm.last_request["response_format"]["json_schema"]["name"] == "Place"
    fake_llm.reply_tool_calls(("Place", {"city": "Porto", "country": "Portugal"}))
    by_call = chat.with_structured_output(Place, method="function_calling")
    assert by_call.invoke("Where is the Douro's mouth?") == Place(city="Porto", country="Portugal")
    forced = fake_llm.last_request["tool_choice"]
    assert forced == {"type": "function", "function": {"name": "Place"}}


def run_llm(user_path: Path, *args: str, stdin: str | None = None) -> str:
    """Simon Willison's `llm` CLI, with its own user folder (models, keys, logs)."""
    env = {**os.environ, "LLM_USER_PATH": str(user_path)}
    done = subprocess.run(
        [sys.executable, "-m", "llm", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def llm_home(stack: LocalStack, tmp_path: Path) -> Path:
    models = f'- model_id: crayfish\n  model_name: crayfish\n  api_base: "{stack.url}/v1"\n'
    (tmp_path / "extra-openai-models.yaml").write_text(models)
    return tmp_path


def test_llm_continued_conversation_is_one_session_with_its_system_prompt(
    llm_home: Path, fake_llm: FakeLLM, api: httpx.Client
):
    fake_llm.reply_forever_with(lambda body: Reply(text=f"answer {len(body['messages'])}"))
    before = sessions(api)
    first = run_llm(llm_home, "-m", "crayfish", "-s", "Answer in one line.", "one")
    second = run_llm(llm_home, "-c", "two")
    third = run_llm(llm_home, "-c", "three")
    assert [first.strip(), second.strip(), third.strip()] == ["answer 2", "answer 4", "answer 6"]
    new = {k: v for k, v in sessions(api).items() if k not in before}
    assert list(new.values()) == [6]
    assert system_of(fake_llm.last_request).endswith("Answer in one line.")


def test_llm_chat_is_one_session(llm_home: Path, fake_llm: FakeLLM, api: httpx.Client):
    fake_llm.reply_forever_with(lambda body: Reply(text=f"answer {len(body['messages'])}"))
    before = sessions(api)
    out = run_llm(llm_home, "chat", "-m", "crayfish", stdin="one\ntwo\nthree\nquit\n")
    assert "answer 2" in out and "answer 4" in out and "answer 6" in out
    new = {k: v for k, v in sessions(api).items() if k not in before}
    assert list(new.values()) == [6]


def test_a_call_the_client_leaves_unanswered_keeps_the_history_valid(
    sdk: openai.OpenAI, fake_llm: FakeLLM
):
    fake_llm.reply_tool_calls(("get_weather", {"city": "Bern"}))
    fake_llm.reply_text("Never mind the weather, then.")
    named = {"X-Crayfish-Session": "oai-abandoned"}
    sdk.chat.completions.create(
        model="crayfish",
        messages=[{"role": "user", "content": "Bern?"}],
        tools=[WEATHER],
        extra_headers=named,
    )
    # A client that does not run the call and just goes on talking (the session is named).
    reply = sdk.chat.completions.create(
        model="crayfish", messages=[{"role": "user", "content": "forget it"}], extra_headers=named
    )
    assert reply.choices[0].message.content == "Never mind the weather, then."
    unanswered = fake_llm.last_request["messages"][-2]
    assert unanswered["role"] == "tool" and "the client sent none" in unanswered["content"]


def test_a_message_from_the_page_while_a_client_call_is_open_keeps_the_history_valid(
    sdk: openai.OpenAI, fake_llm: FakeLLM, api: httpx.Client
):
    fake_llm.reply_tool_calls(("get_weather", {"city": "Graz"}))
    fake_llm.reply_text("Hello from the page.")
    fake_llm.reply_with(lambda body: Reply(text="It is " + body["messages"][-1]["content"]))
    messages: list[Any] = [{"role": "user", "content": "Graz?"}]
    first = sdk.chat.completions.with_raw_response.create(
        model="crayfish", messages=messages, tools=[WEATHER]
    )
    session = first.headers["x-crayfish-session"]
    # The same session, on the web page, before the client sends the call's result.
    task = api.post("/api/chat", json={"message": "hi", "session_id": session}).json()
    assert wait_task(api, task["task_id"])["result"] == "Hello from the page."
    call = first.parse().choices[0].message
    messages += [call, {"role": "tool", "tool_call_id": call.tool_calls[0].id, "content": "fog"}]
    reply = sdk.chat.completions.with_raw_response.create(
        model="crayfish", messages=messages, tools=[WEATHER]
    )
    assert reply.headers["x-crayfish-session"] == session
    # The result came after the conversation went on: the model reads it in a user message.
    late = fake_llm.last_request["messages"][-1]
    assert late["role"] == "user" and "fog" in late["content"]
    assert "[Crayfish] The client's tool sent this result after" in late["content"]


def test_a_parameter_no_provider_could_be_sent_is_refused_here(api: httpx.Client):
    body = {"model": "crayfish", "messages": [{"role": "user", "content": "x"}], "seed": 2**70}
    answer = api.post("/v1/chat/completions", json=body)
    assert answer.status_code == 400
    assert "Integer exceeds 64-bit range" in answer.json()["error"]["message"]


def test_a_conversation_continues_whichever_replica_each_request_reaches(fake_llm: FakeLLM):
    from tests.stacks import running_stack

    fake_llm.reply_forever_with(lambda body: Reply(text=f"answer {len(body['messages'])}"))
    with running_stack(fake_llm.base_url, orchestrators=2) as stack:
        clients = [
            openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) for url in stack.urls
        ]
        messages: list[Any] = []
        seen = set()
        for turn, question in enumerate(("one", "two", "three", "four")):
            messages.append({"role": "user", "content": question})
            raw = clients[turn % 2].chat.completions.with_raw_response.create(
                model="crayfish", messages=messages
            )
            seen.add(raw.headers["x-crayfish-session"])
            messages.append(
                {"role": "assistant", "content": raw.parse().choices[0].message.content}
            )
        assert len(seen) == 1
        assert messages[-1]["content"] == "answer 8"  # system and seven earlier messages


def test_a_conversation_with_tool_calls_from_elsewhere_starts_a_valid_session(
    api: httpx.Client, fake_llm: FakeLLM
):
    fake_llm.reply_text("Still sunny.")
    call = {"id": "elsewhere_1", "type": "function", "function": {"name": "get_weather"}}
    call["function"]["arguments"] = {"city": "Nice"}  # an object, as some clients send it
    messages = [
        {"role": "user", "content": "Nice?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "elsewhere_1", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."},
        {"role": "user", "content": "And now?"},
    ]
    body = {"model": "crayfish", "messages": messages, "tools": [WEATHER]}
    answer = api.post("/v1/chat/completions", json=body)
    assert answer.status_code == 200, answer.text
    sent = fake_llm.last_request["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == '{"city": "Nice"}'
