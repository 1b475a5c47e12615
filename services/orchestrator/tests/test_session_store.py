"""Session history survives torn writes (whole groups or nothing) and slow disks (the event loop
runs on); bad ids are refused; the inbox is durable."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from pathlib import Path

import pytest
from orchestrator.events import EventLog
from orchestrator.sessions.history import InvalidSessionId, SessionStore
from orchestrator.sessions.inbox import Inbox

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


async def test_round_trip(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    await store.append("s1", [{"role": "user", "content": "hi"}])
    await store.append("s1", CALL_GROUP)
    assert await store.load("s1") == [{"role": "user", "content": "hi"}, *CALL_GROUP]
    assert [s.id for s in await store.list()] == ["s1"]


async def test_torn_group_is_dropped_whole(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    await store.append("s1", [{"role": "user", "content": "hi"}])
    await store.append("s1", CALL_GROUP)
    path = store.path("s1")
    data = path.read_bytes()
    # A crash after the first line of the two-message group reached the disk.
    path.write_bytes(data[: data.rindex(b'{"g"')])
    assert await store.load("s1") == [{"role": "user", "content": "hi"}]
    await store.append("s1", [{"role": "assistant", "content": "after restart"}])
    assert (await store.load("s1"))[-1] == {"role": "assistant", "content": "after restart"}


async def test_half_written_line_is_dropped(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    await store.append("s1", [{"role": "user", "content": "hi"}])
    with store.path("s1").open("ab") as handle:
        handle.write(b'{"g": 1, "n": 1, "message": {"role": "assis')
    assert await store.load("s1") == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("bad", ["../etc/passwd", "", "a/b", "x" * 65, ".hidden"])
def test_bad_session_ids_are_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(InvalidSessionId):
        SessionStore(tmp_path).path(bad)


async def test_inbox_keeps_unrun_messages(tmp_path: Path) -> None:
    inbox = Inbox(tmp_path)
    await inbox.add("t1", "s1", "first", "chat")
    await inbox.add("t2", "s1", "second", "chat")
    await inbox.remove("t1")
    assert [e["message"] for e in await Inbox(tmp_path).pending()] == ["second"]


def slow_fsync(monkeypatch: pytest.MonkeyPatch, seconds: float) -> list[str]:
    """Makes every fsync take `seconds` longer (a slow disk); returns the callers' thread names."""
    real = os.fsync
    threads: list[str] = []

    def fsync(fd: int) -> None:
        threads.append(threading.current_thread().name)
        time.sleep(seconds)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return threads


async def test_a_slow_disk_does_not_stall_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SessionStore(tmp_path)
    await store.append("s1", [{"role": "user", "content": "hi"}])  # the file exists now
    threads = slow_fsync(monkeypatch, 0.6)
    ticks: list[float] = []

    async def tick() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    started = time.monotonic()
    await store.append("s1", CALL_GROUP)
    took = time.monotonic() - started
    ticker.cancel()
    assert took >= 0.6
    assert len(ticks) > 20 and max(b - a for a, b in itertools.pairwise(ticks)) < 0.2
    assert threads and threading.main_thread().name not in threads
    assert await store.load("s1") == [{"role": "user", "content": "hi"}, *CALL_GROUP]


async def test_appends_made_at_once_are_stored_in_call_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SessionStore(tmp_path)
    slow_fsync(monkeypatch, 0.002)
    sent = [[{"role": "user", "content": f"message {i}"}] for i in range(40)]
    await asyncio.gather(*(store.append("s1", group) for group in sent))
    assert await store.load("s1") == [group[0] for group in sent]


async def test_inbox_remove_syncs_the_new_file_then_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox = Inbox(tmp_path)
    await inbox.add("t1", "s1", "first", "chat")
    await inbox.add("t2", "s1", "second", "chat")
    real = os.fsync
    synced: list[tuple[str, bool]] = []

    def fsync(fd: int) -> None:
        # What was synced, and whether the inbox still held t1 at that moment.
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), b"t1" in inbox.path.read_bytes()))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    await inbox.remove("t1")
    assert synced == [(str(tmp_path / "inbox.tmp"), True), (str(tmp_path), False)]
    assert [e["task_id"] for e in await inbox.pending()] == ["t2"]
    assert not (tmp_path / "inbox.tmp").exists()


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
