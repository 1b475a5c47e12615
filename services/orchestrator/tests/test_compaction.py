"""Long sessions are pruned, flushed to memory, then compacted, and the history stays valid."""

from __future__ import annotations

from typing import Any

from orchestrator.agent.context import compaction_split, estimate_tokens, prune_tool_results

from tests.fakes import FakeLLM, Reply

LONG = "The quick brown fox jumps over the lazy dog. " * 40  # ~1800 chars


def _is_summary(body: dict[str, Any]) -> bool:
    return body["messages"][0]["content"].startswith("Summarise the conversation")


def _is_flush(body: dict[str, Any]) -> bool:
    names = {t["function"]["name"] for t in body.get("tools") or []}
    return bool(names) and names <= {"memory_write", "memory_search"}


def scripted(fake: FakeLLM, log: list[str]):
    def reply(body: dict[str, Any]) -> Reply:
        if _is_summary(body):
            log.append("summary")
            return Reply(text="SUMMARY: the user likes cats and is writing a novel.")
        if _is_flush(body):
            log.append("flush")
            if body["messages"][-1]["role"] == "user":
                return Reply(tool_calls=[fake.tool_call("memory_write", {"text": "likes cats"})])
            return Reply(text="NO_REPLY")
        log.append("turn")
        return Reply(text="ok " + LONG)

    return reply


async def test_a_long_session_is_compacted_once_and_stays_valid(
    core_factory, fake_llm: FakeLLM, tool_service
):
    log: list[str] = []
    fake_llm.reply_forever_with(scripted(fake_llm, log))
    # The toy tools serve as the memory service's too: memory_write is the memory service's name.
    memory = f"127.0.0.1:{tool_service[1]}"
    core = await core_factory(CRAYFISH_CONTEXT_TOKENS=6000, MEMORY_ADDR=memory)
    for i in range(5):
        turn = await core.turns.wait((await core.submit("long", f"turn {i}: {LONG}")).id, 60)
        assert turn.status == "completed", turn.error
    assert log.count("summary") == 1, log  # compacted once, to half the budget, then room
    assert log.index("flush") < log.index("summary")
    assert [c[0] for c in tool_service[0].calls].count("memory_write") >= 1
    history = await core.store.load("long")
    assert history[0]["content"].startswith("[Summary of the earlier conversation")
    last_turn = fake_llm.last_request["messages"]
    budget = core.assistant.compactor.budget(last_turn[0]["content"])
    assert last_turn[1]["content"].startswith("[Summary of the earlier conversation")
    assert "SUMMARY: the user likes cats" in last_turn[1]["content"]
    assert estimate_tokens(last_turn[2:]) <= budget  # what follows the summary fits the budget
    assert estimate_tokens(last_turn) > 0 and len(last_turn) < 2 * 6 + 2


async def test_flush_and_compaction_text_never_reaches_the_user(core_factory, fake_llm: FakeLLM):
    log: list[str] = []
    fake_llm.reply_forever_with(scripted(fake_llm, log))
    core = await core_factory(CRAYFISH_CONTEXT_TOKENS=4000)
    tasks = []
    for i in range(5):
        turn = await core.turns.wait((await core.submit("quiet", f"turn {i}: {LONG}")).id, 60)
        tasks.append(turn)
    assert "summary" in log
    for turn in tasks:
        events = await core.turns.events.task_events(turn.id, 0)
        shown = "".join(e.data["text"] for e in events if e.type == "assistant.delta")
        assert "NO_REPLY" not in shown and "SUMMARY" not in shown
        assert turn.result.startswith("ok ")
    # The summary's request is recorded as the compaction of the turn that needed it.
    async with core.db.connection() as conn:
        cursor = await conn.execute("SELECT task_id FROM llm_requests WHERE kind = 'compaction'")
        compacting = {row["task_id"] for row in await cursor.fetchall()}
    assert compacting and compacting <= {turn.id for turn in tasks}


def _group(call_id: str) -> list[dict[str, Any]]:
    call = {"id": call_id, "type": "function", "function": {"name": "exec", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": "x" * 5000},
    ]


def test_cuts_fall_on_user_messages_only() -> None:
    history = []
    for i in range(6):
        history += [{"role": "user", "content": f"q{i}"}, *_group(f"c{i}")]
        history.append({"role": "assistant", "content": "a" * 400})
    cut = compaction_split(history, target=2000)
    assert history[cut]["role"] == "user"
    assert cut > 0


def test_old_tool_results_are_pruned_recent_ones_kept() -> None:
    history = []
    for i in range(5):
        history += [{"role": "user", "content": f"q{i}"}, *_group(f"c{i}")]
    pruned, count = prune_tool_results(history, keep_turns=2)
    assert count == 3
    tools = [m for m in pruned if m["role"] == "tool"]
    assert all("pruned to save context" in t["content"] for t in tools[:3])
    assert all(len(t["content"]) == 5000 for t in tools[3:])
    assert [m.get("tool_call_id") for m in pruned] == [m.get("tool_call_id") for m in history]
