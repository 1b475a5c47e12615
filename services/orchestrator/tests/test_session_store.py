"""Session history in PostgreSQL: whole groups or nothing, compactions applied, bad ids refused,
JSONL sessions (the old store) imported once, events resumable after any id."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from orchestrator.agent.turn_context import without_turn_context
from orchestrator.core import OrchestratorCore
from orchestrator.store import (
    Database,
    EventStore,
    InvalidSessionId,
    SessionStore,
    StoredEvent,
    TurnStore,
)
from orchestrator.store.turns import Turn

from tests.fakes import FakeLLM
from tests.postgres import fresh_database

from .conftest import call_group

TERMINAL = {"task.completed"}

CALL_GROUP = call_group("ok \u0000 binary")


@pytest.fixture
async def db() -> AsyncIterator[Database]:
    database = Database(fresh_database())
    await database.open()
    yield database
    await database.close()


async def test_round_trip_listing_and_compaction(db: Database) -> None:
    store = SessionStore(db)
    await store.append("s1", [{"role": "user", "content": "hi"}])
    await store.append("s1", CALL_GROUP)
    assert await store.load("s1") == [{"role": "user", "content": "hi"}, *CALL_GROUP]
    await store.append("s2", [{"role": "user", "content": "other"}])
    await store.append_compaction("s1", "they said hi", replaced=2)
    history = await store.load("s1")
    assert history[0]["content"].endswith("they said hi") and history[1:] == CALL_GROUP[1:]
    listed = await store.list()
    assert [(s.id, s.messages, s.title) for s in listed] == [("s1", 2, "hi"), ("s2", 1, "other")]
    assert await store.delete("s1") and await store.load("s1") == []
    assert not await store.exists("s1") and await store.exists("s2")


async def test_a_history_read_here_sees_what_another_replica_appended_deleted_or_compacted(
    db: Database,
) -> None:
    here, there = SessionStore(db), SessionStore(db)
    await here.append("s", [{"role": "user", "content": "one"}])
    assert await here.load("s") == [{"role": "user", "content": "one"}]
    await there.append("s", [{"role": "assistant", "content": "two"}])
    assert [m["content"] for m in await here.load("s")] == ["one", "two"]
    await there.append_compaction("s", "one and two", 2)
    await there.append("s", [{"role": "user", "content": "three"}])
    contents = [m["content"] for m in await here.load("s")]
    assert len(contents) == 2 and "one and two" in contents[0] and contents[1] == "three"
    assert await here.load("s") == await there.load("s")
    await there.delete("s")
    assert await here.load("s") == []
    await here.append("s", [{"role": "user", "content": "four"}])  # kept, then made again there
    assert len(await here.load("s")) == 1
    await there.delete("s")
    await there.append("s", [{"role": "user", "content": "afresh"}])
    assert await here.load("s") == [{"role": "user", "content": "afresh"}]


async def test_messages_come_back_from_the_server_as_they_went_in(db: Database) -> None:
    # JSON parameters are written by orjson, and by json.dumps what orjson refuses (integers
    # past 64 bits, keys that are not strings): either way the history reads back the same.
    text = '龙虾 "quoted" \\ {json} \u2028 \u0000 😀'
    sent = [
        {"role": "user", "content": text, "meta": {"big": 2**70, "ratio": 0.1}},
        {"role": "assistant", "content": "ok", "counts": {1: "one"}},
    ]
    await SessionStore(db).append("s1", sent)
    read = await SessionStore(db).load("s1")  # another store: read from the server
    assert read[0] == sent[0]
    assert read[1]["counts"] == {"1": "one"}  # as json.dumps writes an integer key


async def test_a_group_is_stored_whole_or_not_at_all(db: Database) -> None:
    store = SessionStore(db)
    await store.append("s1", [{"role": "user", "content": "hi"}])
    broken = [CALL_GROUP[0], {"role": "tool", "tool_call_id": "c1", "content": object()}]
    with pytest.raises(TypeError):
        await store.append("s1", broken)  # the second message cannot be encoded
    assert await store.load("s1") == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("bad", ["../etc/passwd", "", "a/b", "x" * 65, ".hidden"])
async def test_bad_session_ids_are_refused(db: Database, bad: str) -> None:
    with pytest.raises(InvalidSessionId):
        await SessionStore(db).append(bad, [{"role": "user", "content": "hi"}])


async def test_events_resume_after_any_id(db: Database) -> None:
    events = EventStore(db)
    for i in range(5):
        await events.add("t1", "tick", {"n": i})
        await events.add("t2", "tock", {"n": i})
    await events.add("t1", "task.completed", {})
    mine = [(e.seq, e.data.get("n")) async for e in events.follow_task("t1", 3, {"task.completed"})]
    assert mine == [(4, 3), (5, 4), (6, None)]
    everything = await events.all_events(0)
    assert [e.id for e in everything] == sorted(e.id for e in everything)
    assert [e.task_id for e in await events.all_events(everything[-4].id)] == ["t1", "t2", "t1"]


async def test_a_numbered_batch_of_events_keeps_its_numbers_and_its_text(db: Database) -> None:
    events = EventStore(db)
    await events.add("t1", "task.started", {"n": 0})
    await events.add("t2", "other", {})
    text = '龙虾 "quoted" \\ {json} \u2028 \u0000 binary'
    await events.add_numbered(
        "t1",
        [
            StoredEvent(0, 2, "t1", "assistant.delta", {"text": text}, 1.5),
            StoredEvent(0, 3, "t1", "tool.started", {"args": {"a": [1, 2]}}, 2.5),
        ],
    )
    with pytest.raises(psycopg.errors.UniqueViolation):  # a number taken already: nothing added
        await events.add_numbered("t1", [StoredEvent(0, 3, "t1", "late", {}, 3.0)])
    await events.add("t1", "task.completed", {"n": 3})
    mine = [(e.seq, e.type, e.data, e.ts) async for e in events.follow_task("t1", 0, TERMINAL)]
    assert [(seq, type_) for seq, type_, _, _ in mine] == [
        (1, "task.started"),
        (2, "assistant.delta"),
        (3, "tool.started"),
        (4, "task.completed"),
    ]
    assert mine[1][2] == {"text": text} and mine[1][3] == 1.5
    assert mine[2][2] == {"args": {"a": [1, 2]}}
    everything = await events.all_events(0)
    assert [e.id for e in everything] == sorted(e.id for e in everything)
    assert [e.task_id for e in everything] == ["t1", "t2", "t1", "t1", "t1"]


async def test_old_tasks_keep_only_their_terminal_event_and_their_streams_still_end(
    db: Database,
) -> None:
    events = EventStore(db)
    tasks = TurnStore(db, events)
    for task_id, ended in (("old", 1_000.0), ("recent", 9_000.0), ("running", None)):
        await tasks.submit(Turn(id=task_id, session_id="s", message="hi"), None)
        for i in range(3):
            await events.add(task_id, "assistant.delta", {"text": str(i)})
        if ended is not None:
            await events.add(task_id, "task.completed", {})
            async with db.connection() as conn:
                await conn.execute(
                    "UPDATE tasks SET status = 'completed', finished_at = %s WHERE id = %s",
                    (ended, task_id),
                )
    # task.queued, three deltas, task.completed: all but the last go for the old turn only.
    assert await events.prune(finished_before=5_000.0) == 4
    old = [(e.seq, e.type) async for e in events.follow_task("old", 0, {"task.completed"})]
    assert old == [(5, "task.completed")]
    assert len(await events.task_events("recent", 0)) == 5
    assert len(await events.task_events("running", 0)) == 4
    assert await events.prune(finished_before=5_000.0) == 0


def jsonl(*records: dict) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


async def test_jsonl_sessions_and_the_inbox_are_imported_once(
    tmp_path: Path, core_factory, fake_llm: FakeLLM
) -> None:
    folder = tmp_path / "data" / "sessions"
    folder.mkdir(parents=True)
    (folder / "old.jsonl").write_bytes(
        jsonl(
            {"g": 1, "n": 1, "message": {"role": "user", "content": "remember the boat"}},
            {"g": 2, "n": 1, "message": {"role": "assistant", "content": "noted"}},
            {"g": 3, "n": 1, "compaction": {"summary": "a boat", "replaced": 2}},
            {"g": 4, "n": 1, "message": {"role": "user", "content": "and the car"}},
            {"g": 5, "n": 2, "message": CALL_GROUP[0]},
        )
        + b'{"g": 5, "n": 2, "message": {"role": "to'  # torn by a crash: left out
    )
    (tmp_path / "data" / "inbox.jsonl").write_bytes(
        jsonl({"task_id": "t-old", "session_id": "old", "message": "still there?", "kind": "chat"})
    )
    fake_llm.reply_text("yes")
    database = fresh_database()
    core: OrchestratorCore = await core_factory(CRAYFISH_DATABASE_URL=database)
    turn = await core.turns.wait("t-old", 30)
    assert (turn.status, turn.result) == ("completed", "yes")
    history = await core.store.load("old")
    assert [without_turn_context(m["content"]) for m in history] == [
        "[Summary of the earlier conversation, written when it was compacted. The rules of the "
        "system prompt still apply.]\na boat",
        "and the car",
        "still there?",
        "yes",
    ]
    again: OrchestratorCore = await core_factory(CRAYFISH_DATABASE_URL=database)  # a restart
    assert await again.store.load("old") == history
    assert len([s for s in await again.store.list() if s.id == "old"]) == 1


async def test_a_turn_reads_its_history_as_it_accepts_and_writes_its_answer_with_its_outcome(
    db: Database,
) -> None:
    here, there = SessionStore(db), SessionStore(db)  # this replica's store and another's
    tasks = TurnStore(db, EventStore(db), sessions=here)
    await there.append("s", [{"role": "user", "content": "earlier"}])
    await there.append("s", [{"role": "assistant", "content": "yes"}])
    first = Turn(id="t1", session_id="s", message="now")
    assert await tasks.submit(first, "me") and first.status == "running"
    before = await tasks.accept(first, {"role": "user", "content": "now"})
    assert [m["content"] for m in before] == ["earlier", "yes"]
    await tasks.append_turn(first, [{"role": "assistant", "content": "the answer"}])
    assert [m["content"] for m in await there.load("s")] == ["earlier", "yes", "now"]
    first.result = "the answer"
    assert await tasks.finish(first, "completed", "task.completed", {})
    whole = ["earlier", "yes", "now", "the answer"]
    assert [m["content"] for m in await there.load("s")] == whole
    second = Turn(id="t2", session_id="s", message="more")
    assert await tasks.submit(second, "me")
    assert [
        m["content"] for m in await tasks.accept(second, {"role": "user", "content": "more"})
    ] == whole
    assert await here.load("s") == await there.load("s")
    # A turn ended elsewhere (declared dead) writes nothing more, its answer included.
    await tasks.append_turn(second, [{"role": "assistant", "content": "too late"}])
    elsewhere = TurnStore(db, EventStore(db), sessions=there)
    stalled = await elsewhere.get("t2")
    assert stalled is not None
    assert await elsewhere.finish(stalled, "interrupted", "task.interrupted", {}, ("running",))
    assert not await tasks.finish(second, "completed", "task.completed", {})
    assert [m["content"] for m in await there.load("s")] == [*whole, "more"]
