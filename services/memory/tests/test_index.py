"""Indexing: incremental sync by hash, the embedding cache, transcripts, Chinese, the watcher."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import grpc
import pytest
from crayfish.memory.v1 import memory_pb2, memory_pb2_grpc
from memory.backends import make_backend
from memory.core import MemoryCore
from memory.server import build


@pytest.fixture
def core(make_settings, embedder):
    opened = MemoryCore(make_settings(), embedder).open()
    yield opened
    opened.close()


def test_sync_is_incremental_by_content_hash(core, workspace: Path):
    first = core.sync()
    assert (first.files_indexed, first.files_unchanged) == (4, 0)
    again = core.sync()
    assert (again.files_indexed, again.files_unchanged, again.chunks_embedded) == (0, 4, 0)
    (workspace / "memory/2026-05-01.md").write_text("# 2026-05-01\n\nSwitched to Linux.\n")
    (workspace / "memory/projects/garden.md").unlink()
    changed = core.sync()
    assert (changed.files_indexed, changed.files_removed, changed.files_unchanged) == (1, 1, 2)
    assert changed.chunks_embedded == 1
    hits = core.search("Postgres billing database", strategy="keyword")
    assert hits == [], "text that left the file must leave the index"
    assert core.search("Linux")[0].path == "memory/2026-05-01.md"
    forced = core.sync(force=True)
    assert forced.files_indexed == 3 and forced.chunks_embedded == 0, "the cache answers by hash"


def test_index_survives_a_restart(make_settings, embedder, workspace: Path):
    first = MemoryCore(make_settings(), embedder).open()
    first.sync()
    first.close()
    reopened = MemoryCore(make_settings(), embedder).open()
    try:
        assert reopened.sync().files_unchanged == 4
        hit = reopened.search("border collie", strategy="dense")[0]
        assert hit.path == "MEMORY.md" and "Biscuit" in hit.snippet
    finally:
        reopened.close()


def test_a_state_file_from_before_still_opens(make_settings, embedder):
    settings = make_settings()
    state = settings.data_dir / "index" / f"qdrant-edge-{embedder.name}" / "state.sqlite"
    state.parent.mkdir(parents=True)
    with sqlite3.connect(state) as db:  # the unused `meta` table older versions created
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO meta VALUES ('schema', '1')")
    core = MemoryCore(settings, embedder).open()
    try:
        assert core.sync().files_indexed == 4
        assert core.search("border collie")[0].path == "MEMORY.md"
    finally:
        core.close()


def test_chinese_notes_are_found_by_keyword(core, workspace: Path):
    (workspace / "memory/中文.md").write_text(
        "# 笔记\n\n周末和朋友去杭州西湖划船。\n下个月要交房租。\n"
    )
    core.sync()
    hits = core.search("房租什么时候交", strategy="keyword")
    assert hits and hits[0].path == "memory/中文.md" and "房租" in hits[0].snippet


def test_write_get_delete(core, workspace: Path):
    core.sync()
    written = core.write("Todo: call the dentist on Friday.")
    text = (workspace / written.path).read_text()
    assert text.splitlines()[written.start_line - 1] == "Todo: call the dentist on Friday."
    second = core.write("Second note.")
    assert second.path == written.path and second.start_line > written.end_line
    got = core.get(written.path, written.start_line, 1)
    assert got.text == "Todo: call the dentist on Friday." and got.total_lines >= 4
    hit = core.search("dentist appointment")[0]
    assert hit.path == written.path and hit.start_line <= written.start_line <= hit.end_line
    removed, deleted = core.delete(written.path)
    assert removed >= 1 and deleted and not (workspace / written.path).exists()
    with pytest.raises(ValueError):
        core.write("outside", path="../notes.md")


def test_session_transcripts_are_optional_and_kept_apart(make_settings, embedder, tmp_path):
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    records = [
        {"role": "system", "content": "You are Crayfish."},
        {"role": "user", "content": "Remind me: the boiler service is on 14 March."},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted, boiler on 14 March."}]},
        {"role": "tool", "content": "irrelevant tool output about boilers"},
    ]
    (sessions / "abc.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    off = MemoryCore(make_settings(), embedder).open()
    off.sync()
    assert all(h.source == "memory" for h in off.search("boiler service", strategy="keyword"))
    off.close()
    on = MemoryCore(make_settings(sessions_dir=sessions), embedder).open()
    try:
        on.sync()
        hits = on.search("boiler service date", strategy="keyword")
        assert hits[0].source == "sessions" and hits[0].path == "sessions/abc.jsonl"
        assert hits[0].start_line == 2 and "tool output" not in hits[0].snippet
        assert on.get("sessions/abc.jsonl", 2, 1).text.startswith("user: Remind me")
        notes_only = on.search("boiler", path_prefix="memory/")
        assert all(h.source == "memory" for h in notes_only)
    finally:
        on.close()


async def test_dimension_mismatch_makes_the_service_fail_loudly(make_settings, embedder):
    settings = make_settings()
    folder = settings.data_dir / "index" / f"qdrant-edge-{embedder.name}"
    foreign = make_backend("qdrant-edge", folder, "x")
    foreign.ensure(embedder.dim * 2)
    foreign.close()
    server, core = build(settings, embedder)
    port = await server.start("127.0.0.1:0")
    core.start()
    await asyncio.wait_for(core.failed.wait(), 30)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.SearchMemory(memory_pb2.SearchMemoryRequest(query="tea"))
    await server.stop(0)
    await core.stop()
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "768-dimensional" in err.value.details() and "refusing to mix" in err.value.details()


async def test_watcher_indexes_new_notes_without_a_sync_call(make_settings, embedder, workspace):
    server, core = build(make_settings(watch=True, watch_debounce_ms=100), embedder)
    port = await server.start("127.0.0.1:0")
    core.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = memory_pb2_grpc.MemoryServiceStub(channel)
            request = memory_pb2.SearchMemoryRequest(query="saxophone lessons", strategy="keyword")
            assert not (await stub.SearchMemory(request)).hits
            (workspace / "memory/2026-06-01.md").write_text(
                "# June\n\nStarted saxophone lessons.\n"
            )
            for _ in range(150):
                hits = (await stub.SearchMemory(request)).hits
                if hits:
                    break
                await asyncio.sleep(0.1)
            assert hits and hits[0].path == "memory/2026-06-01.md"
    finally:
        await server.stop(0)
        await core.stop()


def test_default_model_answers_chinese_questions_about_english_notes(make_settings):
    core = MemoryCore(make_settings()).open()  # the default model, loaded for real
    try:
        core.sync()
        assert "multilingual-e5-small" in core.stats().model
        hit = core.search("用户的狗叫什么名字？", strategy="dense")[0]
        assert hit.path == "MEMORY.md" and "Biscuit" in hit.snippet
        trip = core.search("护照什么时候续签？", strategy="dense")[0]
        assert trip.path == "memory/2026-05-02.md"
    finally:
        core.close()
