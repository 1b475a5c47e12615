"""Idle summaries and memory consolidation with the scripted LLM: a quiet session gets a summary
after the idle time that survives a restart and that compaction reuses; consolidation runs on
demand as a light background turn over the summaries, not when nothing new happened, and once
when two replicas ask at once. (The edit landing in USER.md through the real memory service:
tests/integration/test_consolidation.py.)"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from orchestrator.agent.compaction import SUMMARY_PROMPT
from orchestrator.consolidation.instructions import DEFAULT_INSTRUCTIONS
from orchestrator.consolidation.runs import TOOLS
from orchestrator.core import OrchestratorCore
from orchestrator.store.sessions import summary_message

from tests.fakes import ErrorReply, FakeLLM, Reply
from tests.postgres import fresh_database

from .conftest import ScriptedToolService, make_settings

PREFERENCE = "I prefer green tea, no sugar. Please remember that."
SUMMARY = "The user prefers green tea without sugar."
NOTE = "- Prefers green tea, no sugar (session tea)"
REPO_TEMPLATE = Path(__file__).resolve().parents[3] / "workspace"


def is_summary(body: dict[str, Any]) -> bool:
    return bool(body["messages"][0]["content"] == SUMMARY_PROMPT)


def is_consolidation(body: dict[str, Any]) -> bool:
    first = body["messages"][1]
    return first["role"] == "user" and str(first["content"]).startswith("Memory consolidation.")


def the_model(fake: FakeLLM) -> None:
    """Summaries say SUMMARY; a consolidation saves NOTE with memory_write, then reports;
    chat turns answer briefly."""

    def answer(body: dict[str, Any]) -> Reply:
        if is_summary(body):
            return Reply(text=SUMMARY)
        if is_consolidation(body):
            if body["messages"][-1]["role"] == "tool":
                return Reply(text="USER.md: green tea")
            reason = "session tea: stated a preference"
            call = fake.tool_call("memory_write", {"text": NOTE, "reason": reason})
            return Reply(tool_calls=[call])
        if "NO_REPLY" in str(body["messages"][-1]["content"]):  # a memory flush
            return Reply(text="NO_REPLY")
        return Reply(text="Noted.")

    fake.reply_forever_with(answer)


def summary_requests(fake: FakeLLM) -> list[dict[str, Any]]:
    return [body for body in fake.requests if is_summary(body)]


def consolidation_starts(fake: FakeLLM) -> list[dict[str, Any]]:
    """The first request of each consolidation turn (its message is the last one)."""
    return [b for b in fake.requests if is_consolidation(b) and b["messages"][-1]["role"] == "user"]


async def chat(core: OrchestratorCore, session_id: str, text: str) -> None:
    turn = await core.submit(session_id, text)
    done = await core.wait_for_task(turn.id, 30)
    assert done.status == "completed", done.error


async def stored_summary(core: OrchestratorCore, session_id: str) -> dict[str, Any] | None:
    async with core.db.connection() as conn:
        cursor = await conn.execute(
            "SELECT m.summary, m.made_at, s.updated_at FROM session_summaries m"
            " JOIN sessions s ON s.id = m.session_id WHERE m.session_id = %s",
            (session_id,),
        )
        return await cursor.fetchone()


async def wait_for_summary(core: OrchestratorCore, session_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while (found := await stored_summary(core, session_id)) is None:
        assert time.monotonic() < deadline, "no idle summary was made"
        await asyncio.sleep(0.1)
    return found


async def consolidation_turns(core: OrchestratorCore) -> list[str]:
    async with core.db.connection() as conn:
        cursor = await conn.execute("SELECT id FROM tasks WHERE kind = 'consolidation'")
        return [row["id"] for row in await cursor.fetchall()]


@asynccontextmanager
async def running(settings: Any) -> AsyncIterator[OrchestratorCore]:
    """A core that is closed at the end of the block (a replica that stops)."""
    core = OrchestratorCore(settings)
    await core.start()
    try:
        yield core
    finally:
        await core.close()


def test_the_template_ships_the_default_instructions() -> None:
    assert (REPO_TEMPLATE / "CONSOLIDATE.md").read_text() == DEFAULT_INSTRUCTIONS
    assert (REPO_TEMPLATE / "USER.md").is_file()


async def test_an_idle_session_is_summarised_and_the_summary_survives_a_restart(
    core_factory, fake_llm: FakeLLM, tmp_path: Path, tool_service
) -> None:
    the_model(fake_llm)
    database = fresh_database()
    idle = dict(CRAYFISH_AUTO_RECALL="false", CRAYFISH_DATABASE_URL=database)
    settings = make_settings(
        tmp_path, fake_llm.base_url, tool_service[1], CRAYFISH_IDLE_SUMMARY_MINUTES=0.05, **idle
    )
    async with running(settings) as first:
        await chat(first, "tea", PREFERENCE)
        found = await wait_for_summary(first, "tea")
    assert found["summary"] == SUMMARY
    # Made once the session had been quiet for the idle time (0.05 min), not before.
    assert found["made_at"] - found["updated_at"] >= 3.0
    made = len(summary_requests(fake_llm))

    later = await core_factory(CRAYFISH_IDLE_SUMMARY_MINUTES=0, **idle)
    turn = await later.consolidate_memory()
    assert turn is not None
    assert (await later.wait_for_task(turn.id, 30)).status == "completed"
    (start,) = consolidation_starts(fake_llm)
    assert SUMMARY in start["messages"][-1]["content"]
    assert "### Session tea" in start["messages"][-1]["content"]
    assert len(summary_requests(fake_llm)) == made, "the kept summary was read, not made again"


async def test_compaction_reuses_the_idle_summary(
    core_factory, fake_llm: FakeLLM, tmp_path: Path, tool_service
) -> None:
    the_model(fake_llm)
    database = fresh_database()
    base = dict(CRAYFISH_AUTO_RECALL="false", CRAYFISH_DATABASE_URL=database)
    long_turns = [f"{PREFERENCE} Turn {n}: " + "and more about teas. " * 150 for n in range(3)]
    settings = make_settings(
        tmp_path, fake_llm.base_url, tool_service[1], CRAYFISH_IDLE_SUMMARY_MINUTES=0.05, **base
    )
    async with running(settings) as first:
        for text in long_turns:
            await chat(first, "tea", text)
        await wait_for_summary(first, "tea")

    # After a restart with a smaller context window, the next turn must compact.
    small = await core_factory(
        CRAYFISH_CONTEXT_TOKENS=4000, CRAYFISH_IDLE_SUMMARY_MINUTES=0, **base
    )
    made, asked = len(summary_requests(fake_llm)), len(fake_llm.requests)
    await chat(small, "tea", "What do I drink?")
    assert len(summary_requests(fake_llm)) == made, "compaction asked for a summary again"
    reused = len(fake_llm.requests) - asked
    sent = fake_llm.requests[-1]["messages"]
    assert sent[1]["content"] == summary_message(SUMMARY)
    assert not any("Turn 0" in str(m["content"]) for m in sent)
    assert any("Turn 2" in str(m["content"]) for m in sent)  # the latest turn kept verbatim

    # The same conversation with no idle summary: that compaction does ask for one.
    for text in long_turns:
        await chat(small, "fresh", text)
    assert len(summary_requests(fake_llm)) > made
    spared = len(json.dumps(summary_requests(fake_llm)[-1]["messages"]))
    print(f"\ncompaction after an idle pause: {reused} LLM requests, none of them a summary")
    print(f"a compaction's summary request without it: {spared} characters of messages")


async def test_consolidation_on_demand_is_a_light_background_turn(
    core_factory, fake_llm: FakeLLM, tmp_path: Path, tool_service
) -> None:
    the_model(fake_llm)
    servicer: ScriptedToolService = tool_service[0]
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "CONSOLIDATE.md").write_text("Keep only what the user drinks.\n")
    (workspace / "USER.md").write_text("# USER.md\nName: Ana\n")
    (workspace / "AGENTS.md").write_text("Work carefully.\n")
    presets = [
        {"name": "main", "base_url": fake_llm.base_url, "model": "big-model"},
        {"name": "cheap", "base_url": fake_llm.base_url, "model": "small-model"},
    ]
    core: OrchestratorCore = await core_factory(
        CRAYFISH_AUTO_RECALL="false",
        CRAYFISH_MODELS=json.dumps(presets),
        CRAYFISH_MODEL_BACKGROUND="cheap",
        MEMORY_ADDR=f"127.0.0.1:{tool_service[1]}",  # the toy memory_write
    )
    await chat(core, "tea", PREFERENCE)
    turn = await core.consolidate_memory()
    assert turn is not None and turn.session_id == "memory-consolidation"
    done = await core.wait_for_task(turn.id, 30)
    assert done.status == "completed" and done.delivered is False

    (start,) = consolidation_starts(fake_llm)
    system, message = start["messages"][0]["content"], start["messages"][-1]["content"]
    assert start["model"] == "small-model"  # the background preset
    assert "Work carefully." in system and "## Memory Recall" not in system  # minimal
    assert "Keep only what the user drinks." in message  # the workspace's CONSOLIDATE.md
    assert "Name: Ana" in message and SUMMARY in message
    offered = {tool["function"]["name"] for tool in start["tools"]}
    assert "memory_write" in offered and offered <= TOOLS
    assert ("memory_write", {"text": NOTE, "reason": "session tea: stated a preference"}) in [
        (name, args) for name, args, *_ in servicer.calls
    ]

    # Nothing new since: no run, no LLM request.
    asked = len(fake_llm.requests)
    assert await core.consolidate_memory() is None
    assert len(fake_llm.requests) == asked
    # Something new: a run again.
    await chat(core, "coffee", "I also like coffee in the morning.")
    assert await core.consolidate_memory() is not None


async def test_the_schedule_runs_nothing_when_nothing_happened(
    core_factory, fake_llm: FakeLLM
) -> None:
    the_model(fake_llm)
    core: OrchestratorCore = await core_factory(CRAYFISH_CONSOLIDATE_INTERVAL=0.05)
    due_times: set[float] = set()
    deadline = time.monotonic() + 30
    while len(due_times) < 3:  # the schedule fired twice and looked each time
        assert time.monotonic() < deadline, f"the schedule fired {len(due_times)}x"
        async with core.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT next_run FROM scheduled_turns WHERE id = 'consolidate' AND builtin"
            )
            row = await cursor.fetchone()
        if row is not None:
            due_times.add(row["next_run"])
        await asyncio.sleep(0.02)
    assert fake_llm.requests == [] and await consolidation_turns(core) == []


async def test_two_replicas_consolidating_at_once_run_once(core_factory, fake_llm: FakeLLM) -> None:
    the_model(fake_llm)
    one: OrchestratorCore = await core_factory(CRAYFISH_AUTO_RECALL="false")
    other: OrchestratorCore = await core_factory(CRAYFISH_AUTO_RECALL="false")
    await chat(one, "tea", PREFERENCE)
    first, second = await asyncio.gather(one.consolidate_memory(), other.consolidate_memory())
    assert first is not None and second is not None
    assert first.id == second.id
    assert await consolidation_turns(one) == [first.id]
    assert (await one.wait_for_task(first.id, 30)).status == "completed"
    assert len(consolidation_starts(fake_llm)) == 1


async def test_a_failed_run_leaves_its_summaries_to_the_next(
    core_factory, fake_llm: FakeLLM
) -> None:
    the_model(fake_llm)
    core: OrchestratorCore = await core_factory(
        CRAYFISH_AUTO_RECALL="false", CRAYFISH_LLM_RETRIES=0
    )
    await chat(core, "tea", PREFERENCE)

    def broken(body: dict[str, Any]) -> Reply:
        if is_consolidation(body):
            return Reply(error=ErrorReply(400, "the provider refused"))
        return Reply(text=SUMMARY)

    fake_llm.reply_forever_with(broken)
    failed = await core.consolidate_memory()
    assert failed is not None
    assert (await core.wait_for_task(failed.id, 30)).status == "failed"

    the_model(fake_llm)
    again = await core.consolidate_memory()
    assert again is not None and again.id != failed.id
    assert (await core.wait_for_task(again.id, 30)).status == "completed"
    starts = consolidation_starts(fake_llm)
    assert len(starts) == 2 and all(SUMMARY in s["messages"][-1]["content"] for s in starts)


async def test_a_follow_up_becomes_a_schedule(core_factory, fake_llm: FakeLLM) -> None:
    follow_up = {
        "message": "Remind the user of the dentist appointment with notify.",
        "at": "2099-01-05T09:00:00+00:00",
        "own_session": True,
    }

    def answer(body: dict[str, Any]) -> Reply:
        if is_summary(body):
            return Reply(text="The user has a dentist appointment on 5 January 2099.")
        if is_consolidation(body):
            if body["messages"][-1]["role"] == "tool":
                return Reply(text="Scheduled a reminder.")
            return Reply(tool_calls=[fake_llm.tool_call("schedule_add", follow_up)])
        return Reply(text="Noted.")

    fake_llm.reply_forever_with(answer)
    core: OrchestratorCore = await core_factory(CRAYFISH_AUTO_RECALL="false")
    await chat(core, "dentist", "Remind me of the dentist on 5 January 2099 at 9.")
    turn = await core.consolidate_memory()
    assert turn is not None
    assert (await core.wait_for_task(turn.id, 30)).status == "completed"
    (entry,) = await core.list_schedules()
    assert entry.message == follow_up["message"] and entry.created_in == "memory-consolidation"


async def test_what_one_run_cannot_read_goes_to_the_next(core_factory, fake_llm: FakeLLM) -> None:
    def answer(body: dict[str, Any]) -> Reply:
        if is_summary(body):  # a long summary naming the session's topic
            topic = "tea" if "tea" in body["messages"][-1]["content"] else "coffee"
            return Reply(text=f"About {topic}. " + "Details. " * 3000)
        if is_consolidation(body):
            return Reply(text="NO_REPLY")
        return Reply(text="Noted.")

    fake_llm.reply_forever_with(answer)
    core: OrchestratorCore = await core_factory(CRAYFISH_AUTO_RECALL="false")
    await chat(core, "tea", "I like tea.")
    await chat(core, "coffee", "I like coffee.")
    read = []
    for _ in range(2):
        turn = await core.consolidate_memory()
        assert turn is not None
        assert (await core.wait_for_task(turn.id, 30)).status == "completed"
        read.append(consolidation_starts(fake_llm)[-1]["messages"][-1]["content"])
    assert ("### Session tea" in read[0]) != ("### Session coffee" in read[0])  # one of them
    assert ("### Session tea" in read[1]) != ("### Session tea" in read[0])  # then the other
    assert await core.consolidate_memory() is None


async def test_the_off_switches_leave_the_schedules_out(core_factory) -> None:
    on: OrchestratorCore = await core_factory(CRAYFISH_DATABASE_URL=fresh_database())
    off: OrchestratorCore = await core_factory(
        CRAYFISH_DATABASE_URL=fresh_database(),
        CRAYFISH_CONSOLIDATE_INTERVAL=0,
        CRAYFISH_IDLE_SUMMARY_MINUTES=0,
    )
    wanted = {"consolidate", "idle-summaries"}
    for core, expected in ((on, wanted), (off, set())):
        async with core.db.connection() as conn:
            cursor = await conn.execute("SELECT id FROM scheduled_turns WHERE builtin")
            assert {row["id"] for row in await cursor.fetchall()} & wanted == expected
