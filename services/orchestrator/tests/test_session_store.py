"""Session history survives torn writes: whole groups or nothing, and bad ids are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from orchestrator.events import EventLog
from orchestrator.sessions.store import Inbox, InvalidSessionId, SessionStore

CALL_GROUP = [
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "exec", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "ok"},
]


def test_round_trip(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.append("s1", [{"role": "user", "content": "hi"}])
    store.append("s1", CALL_GROUP)
    assert store.load("s1") == [{"role": "user", "content": "hi"}, *CALL_GROUP]
    assert [s.id for s in store.list()] == ["s1"]


def test_torn_group_is_dropped_whole(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.append("s1", [{"role": "user", "content": "hi"}])
    store.append("s1", CALL_GROUP)
    path = store.path("s1")
    data = path.read_bytes()
    # A crash after the first line of the two-message group reached the disk.
    path.write_bytes(data[: data.rindex(b'{"g"')])
    assert store.load("s1") == [{"role": "user", "content": "hi"}]
    store.append("s1", [{"role": "assistant", "content": "after restart"}])
    assert store.load("s1")[-1] == {"role": "assistant", "content": "after restart"}


def test_half_written_line_is_dropped(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.append("s1", [{"role": "user", "content": "hi"}])
    with store.path("s1").open("ab") as handle:
        handle.write(b'{"g": 1, "n": 1, "message": {"role": "assis')
    assert store.load("s1") == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("bad", ["../etc/passwd", "", "a/b", "x" * 65, ".hidden"])
def test_bad_session_ids_are_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(InvalidSessionId):
        SessionStore(tmp_path).path(bad)


def test_inbox_keeps_unrun_messages(tmp_path: Path) -> None:
    inbox = Inbox(tmp_path)
    inbox.add("t1", "s1", "first", "chat")
    inbox.add("t2", "s1", "second", "chat")
    inbox.remove("t1")
    assert [e["message"] for e in Inbox(tmp_path).pending()] == ["second"]


async def test_event_log_resumes_after_any_id_and_trims_old_events() -> None:
    log = EventLog(max_events=10)
    for i in range(25):
        await log.add("t", "tick", {"n": i})
    kept = [e.id for e in log.events]
    assert kept == list(range(kept[0], 26)) and len(kept) <= 10
    assert [e.id for e in log.after(20)] == [21, 22, 23, 24, 25]
    assert [e.id for e in log.after(0)] == kept  # too far behind: from the oldest kept
    await log.close()
    assert [e.id async for e in log.follow(23)] == [24, 25]
