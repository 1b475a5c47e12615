"""The tool loop against the scripted fake LLM (which rejects malformed histories)."""

from __future__ import annotations

from typing import Any

from orchestrator.agent.turn_context import without_turn_context
from orchestrator.core import OrchestratorCore
from orchestrator.store.turns import Turn

from tests.fakes import FakeLLM, Reply


async def run(core: OrchestratorCore, message: str, session: str = "s1") -> Turn:
    turn = await core.submit(session, message)
    return await core.turns.wait(turn.id, within=60)


async def events(core: OrchestratorCore, turn: Turn, kind: str) -> list[dict[str, Any]]:
    return [e.data for e in await core.turns.events.task_events(turn.id, 0) if e.type == kind]


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


async def test_plain_answer_is_the_result_and_is_persisted(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_text("Hello there!")
    core = await core_factory()
    turn = await run(core, "hi")
    assert (turn.status, turn.result) == ("completed", "Hello there!")
    stored = await core.store.load("s1")
    # The user message is kept exactly as sent (with the turn context), for prompt caching.
    assert stored == [
        {"role": "user", "content": fake_llm.last_request["messages"][-1]["content"]},
        {"role": "assistant", "content": "Hello there!"},
    ]
    assert without_turn_context(stored[0]["content"]) == "hi"
    assert turn.usage["total_tokens"] > 0


async def test_tool_call_result_goes_back_in_order(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_tool_calls(("echo", {"text": "one"}), ("sleep", {"seconds": 0.3}))
    fake_llm.reply_text("done")
    turn = await run(await core_factory(), "go")
    assert turn.result == "done"
    second = fake_llm.requests[1]
    assert [m["content"] for m in tool_messages(second)] == ["echo: one", "slept 0.3s"]
    assistant = [m for m in second["messages"] if m["role"] == "assistant"][-1]
    assert [c["id"] for c in assistant["tool_calls"]] == [
        m["tool_call_id"] for m in tool_messages(second)
    ]


async def test_calls_of_one_round_run_concurrently(core_factory, fake_llm, tool_service):
    fake_llm.reply_tool_calls(("sleep", {"seconds": 0.4}), ("sleep", {"seconds": 0.4}))
    fake_llm.reply_text("both done")
    await run(await core_factory(), "go")
    (_, _, start_a, end_a), (_, _, start_b, end_b) = tool_service[0].calls
    assert start_b < end_a and start_a < end_b  # the two sleeps overlapped


async def test_bad_calls_become_readable_results(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_tool_calls(
        ("nope", {}), ("echo", '{"text": "unterminated'), ("echo", {"txt": 1}), ("fail", {})
    )
    fake_llm.reply_text("recovered")
    turn = await run(await core_factory(), "go")
    assert turn.status == "completed" and turn.result == "recovered"
    results = [m["content"] for m in tool_messages(fake_llm.requests[1])]
    assert "unknown tool `nope`" in results[0] and "echo" in results[0]
    assert "not valid JSON" in results[1]
    assert "'text' is a required property" in results[2]
    assert "always fails" in results[3]


async def test_round_cap_ends_a_runaway_loop(core_factory, fake_llm: FakeLLM):
    counter = iter(range(1000))
    fake_llm.reply_forever_with(
        lambda body: Reply(tool_calls=[fake_llm.tool_call("echo", {"text": f"x{next(counter)}"})])
    )
    core = await core_factory(CRAYFISH_MAX_ROUNDS=4)
    turn = await run(core, "loop forever")
    assert turn.status == "completed"
    assert "limit of 4 tool rounds" in (turn.result or "")
    assert len(fake_llm.requests) == 4
    history = await core.store.load("s1")
    assert history[-1]["role"] == "assistant" and "limit" in history[-1]["content"]


async def test_identical_calls_are_stopped_early(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_forever_with(
        lambda body: Reply(tool_calls=[fake_llm.tool_call("echo", {"text": "same"})])
    )
    turn = await run(await core_factory(), "repeat")
    assert "3 times with the same arguments" in (turn.result or "")
    assert len(fake_llm.requests) == 3


async def test_call_written_as_text_is_run(core_factory, fake_llm: FakeLLM, tool_service):
    fake_llm.reply_text('<tool_call>\n{"name": "echo", "arguments": {"text": "hi"}}\n</tool_call>')
    fake_llm.reply_text("The tool said hi.")
    core = await core_factory()
    turn = await run(core, "say hi via the tool")
    assert turn.result == "The tool said hi."
    assert [c[0] for c in tool_service[0].calls] == ["echo"]
    assert [m["content"] for m in tool_messages(fake_llm.requests[1])] == ["echo: hi"]
    shown = "".join(d["text"] for d in await events(core, turn, "assistant.delta"))
    assert "<tool_call>" not in shown and shown == "The tool said hi."


async def test_unknown_written_call_is_re_asked_once(core_factory, fake_llm: FakeLLM):
    bogus = '<tool_call>{"name": "web_browse", "arguments": {"url": "x"}}</tool_call>'
    fake_llm.reply_text(bogus)
    fake_llm.reply_text(bogus)
    turn = await run(await core_factory(), "browse")
    assert len(fake_llm.requests) == 2
    assert "tool call as text" in fake_llm.requests[1]["messages"][-1]["content"]
    assert "<tool_call>" not in (turn.result or "")
    assert turn.result


async def test_reasoning_is_kept_out_of_answer_and_history(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_text("<think>they want a number</think>42", reasoning="deep thoughts")
    fake_llm.reply_text("still 42")
    core = await core_factory()
    first = await run(core, "answer?")
    second = await run(core, "again?")  # fake rejects reasoning_content sent back: 400
    assert (first.result, second.result) == ("42", "still 42")
    assert "think" not in str(fake_llm.requests[1]["messages"])


async def test_silent_reply_is_not_delivered(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_text("NO_REPLY")
    core = await core_factory()
    turn = await run(core, "background ping")
    assert turn.delivered is False and turn.result == ""
    assert await events(core, turn, "assistant.delta") == []


async def test_transient_llm_errors_are_retried(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_error(503, "overloaded")
    fake_llm.reply_error(429, "slow down", type="rate_limit_error")
    fake_llm.reply_text("made it")
    turn = await run(await core_factory(), "hi")
    assert turn.result == "made it"


async def test_client_errors_fail_the_task_clearly(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_error(401, "Incorrect API key provided", type="invalid_request_error")
    core = await core_factory()
    turn = await run(core, "hi")
    assert turn.status == "failed"
    assert "401" in (turn.error or "") and "Incorrect API key" in (turn.error or "")
    assert await events(core, turn, "task.failed")


async def test_unreachable_llm_fails_with_the_address(core_factory):
    core = await core_factory(OPENAI_BASE_URL="http://127.0.0.1:9/v1", CRAYFISH_LLM_RETRIES=1)
    turn = await run(core, "hi")
    assert turn.status == "failed" and "cannot reach the LLM" in (turn.error or "")


async def test_null_content_is_never_sent_to_strict_servers(core_factory):
    with FakeLLM(strict_content=True) as strict:
        strict.reply_tool_calls(("echo", {"text": "a"}))
        strict.reply_text("ok")
        turn = await run(await core_factory(OPENAI_BASE_URL=strict.base_url), "go")
    assert turn.result == "ok"


async def test_messages_to_one_session_run_one_at_a_time(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_tool_calls(("sleep", {"seconds": 0.3}))
    fake_llm.reply_text("first done")
    fake_llm.reply_text("second done")
    core = await core_factory()
    first = await core.submit("s1", "first")
    second = await core.submit("s1", "second")
    assert second.status == "queued"
    second = await core.turns.wait(second.id, within=30)
    first = await core.turns.wait(first.id, within=30)
    assert (first.result, second.result) == ("first done", "second done")
    history = await core.store.load("s1")
    roles = [(m["role"], without_turn_context(m.get("content") or "")) for m in history]
    assert roles[0] == ("user", "first") and ("user", "second") in roles
    assert roles.index(("user", "second")) > roles.index(("assistant", "first done"))


async def test_first_round_can_force_a_tool(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_tool_calls(("echo", {"text": "forced"}))
    fake_llm.reply_text("done")
    await run(await core_factory(CRAYFISH_LLM_FIRST_TOOL_CHOICE="echo"), "go")
    first, second = fake_llm.requests[-2:]
    assert first["tool_choice"] == {"type": "function", "function": {"name": "echo"}}
    assert "tool_choice" not in second  # later rounds leave the choice to the model


async def test_text_tool_mode_never_sends_tool_roles(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_text('<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>')
    fake_llm.reply_text("The echo said hi.")
    core = await core_factory(CRAYFISH_LLM_TOOL_MODE="text")
    turn = await run(core, "use echo")
    assert turn.result == "The echo said hi."
    first, second = fake_llm.requests[-2:]
    assert "tools" not in first and "<tool_call>" in first["messages"][0]["content"]
    assert '"text": {"type": "string"}' in first["messages"][0]["content"]
    roles = [m["role"] for m in second["messages"]]
    assert "tool" not in roles and not any(m.get("tool_calls") for m in second["messages"])
    assert second["messages"][-1]["content"].startswith("[tool results]")
    assert "echo: hi" in second["messages"][-1]["content"]
    stored = await core.store.load("s1")  # history keeps the native shape
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]


async def test_streamed_calls_that_repeat_the_name_in_every_chunk(core_factory, fake_llm: FakeLLM):
    call = fake_llm.tool_call("echo", {"text": "a fairly long argument to split in pieces"})
    fake_llm.reply(Reply(tool_calls=[call], repeat_names=True))
    fake_llm.reply_text("done")
    turn = await run(await core_factory(), "go")
    assert turn.result == "done"
    assert tool_messages(fake_llm.requests[-1])[0]["content"].startswith("echo: a fairly long")


async def test_an_empty_reply_is_re_asked_once(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_text("")
    fake_llm.reply_text("Here you go.")
    turn = await run(await core_factory(), "hello?")
    assert turn.result == "Here you go."
    assert "reply was empty" in fake_llm.requests[-1]["messages"][-1]["content"]


async def test_two_empty_replies_give_a_clear_message(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_text("")
    fake_llm.reply_text("")
    turn = await run(await core_factory(), "hello?")
    assert turn.status == "completed" and "empty reply" in (turn.result or "")


async def test_a_tool_that_outlives_its_deadline_is_a_readable_result(
    core_factory, fake_llm: FakeLLM
):
    fake_llm.reply_tool_calls(("sleep", {"seconds": 2}))
    fake_llm.reply_text("moved on")
    turn = await run(await core_factory(CRAYFISH_TOOL_TIMEOUT=0.3), "wait")
    assert turn.result == "moved on"
    assert "timed out after 0.3s" in tool_messages(fake_llm.requests[-1])[0]["content"]


async def test_long_tool_results_keep_head_and_tail(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_tool_calls(("echo", {"text": "START" + "x" * 5000 + "END"}))
    fake_llm.reply_text("ok")
    await run(await core_factory(CRAYFISH_TOOL_RESULT_MAX_CHARS=1000), "go")
    result = tool_messages(fake_llm.requests[-1])[0]["content"]
    assert len(result) <= 1000 and "chars cut here" in result
    assert result.startswith("echo: START") and result.endswith("END")
