"""The optional JSONL transcript mirror (CRAYFISH_TRANSCRIPTS_DIR), for the memory service to
index: a turn's user and assistant text in order, never re-imported, gone with the session, and a
failed write never fails a turn."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from orchestrator.agent.turn_context import without_turn_context
from orchestrator.core import OrchestratorCore
from orchestrator.store.turns import Turn

from tests.fakes import FakeLLM


async def run(core: OrchestratorCore, message: str, session: str = "s1") -> Turn:
    turn = await core.submit(session, message)
    return await core.turns.wait(turn.id, within=60)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def test_off_by_default_writes_nothing(core_factory, fake_llm: FakeLLM, tmp_path: Path):
    fake_llm.reply_text("Hello there!")
    core = await core_factory()
    assert core.settings.transcripts_dir is None
    assert (await run(core, "hi")).status == "completed"
    await core.close()
    assert not (tmp_path / "data" / "sessions").exists()


async def test_a_turn_is_mirrored_in_order_not_imported_again_and_deleted_with_the_session(
    core_factory, fake_llm: FakeLLM, tmp_path: Path
):
    # The old JSONL sessions folder, as .env.example documents for MEMORY_SESSIONS_DIR.
    mirror = tmp_path / "data" / "sessions"
    fake_llm.reply_tool_calls(("echo", {"text": "one"}))
    fake_llm.reply_text("The boiler service is on 14 March.")
    fake_llm.reply_text("Second answer, ünïcode kept.")
    core = await core_factory(CRAYFISH_TRANSCRIPTS_DIR=str(mirror))
    assert (await run(core, "When is the boiler service?")).status == "completed"
    assert (await run(core, "and then?")).status == "completed"
    history = await core.store.load("s1")
    await core.close()  # waits for the queued writes
    assert [m["role"] for m in history] == [
        "user", "assistant", "tool", "assistant", "user", "assistant"
    ]  # fmt: skip
    assert lines(mirror / "s1.jsonl") == [
        {"role": "user", "content": "When is the boiler service?"},
        {"role": "assistant", "content": "The boiler service is on 14 March."},
        {"role": "user", "content": "and then?"},
        {"role": "assistant", "content": "Second answer, ünïcode kept."},
    ]  # the tool call (no text) and the tool result are left out
    assert os.stat(mirror / "s1.jsonl").st_mode & 0o077 == 0

    again = await core_factory(CRAYFISH_TRANSCRIPTS_DIR=str(mirror))  # start-up import runs
    assert await again.store.load("s1") == history, "the mirror must not be imported as old JSONL"
    await again.store.delete("s1")
    await again.close()
    assert not (mirror / "s1.jsonl").exists()


async def test_a_failed_write_is_logged_once_and_never_fails_the_turn(
    core_factory, fake_llm: FakeLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the folder should be")
    core = await core_factory(CRAYFISH_TRANSCRIPTS_DIR=str(blocked))
    with caplog.at_level(logging.WARNING, logger="orchestrator.store.transcripts"):
        for answer in ("one", "two"):
            fake_llm.reply_text(answer)
            turn = await run(core, "hi")
            assert (turn.status, turn.result) == ("completed", answer)
        stored = [without_turn_context(m["content"]) for m in await core.store.load("s1")]
        assert stored == ["hi", "one", "hi", "two"]
        await core.close()
    warnings = [r for r in caplog.records if "transcript mirror" in r.getMessage()]
    assert len(warnings) == 1 and "s1.jsonl" in warnings[0].getMessage()


async def test_memory_indexes_the_mirror(core_factory, fake_llm: FakeLLM, tmp_path: Path):
    memory_core = pytest.importorskip("memory.core")
    from memory.config import MemorySettings
    from memory.embedder import load_embedder

    mirror = tmp_path / "transcripts"
    fake_llm.reply_text("Noted: the heat pump is serviced every October.")
    core = await core_factory(CRAYFISH_TRANSCRIPTS_DIR=str(mirror))
    assert (await run(core, "Remember the heat pump service month", "house")).status == "completed"
    await core.close()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    settings = MemorySettings(
        host="127.0.0.1",
        port=0,
        workspace=tmp_path / "workspace",
        data_dir=tmp_path / "memory-data",
        sessions_dir=mirror,
        watch=False,
    )  # type: ignore[call-arg]
    memory = memory_core.MemoryCore(settings, load_embedder("minilm")).open()
    try:
        memory.sync()
        hits = memory.search("heat pump serviced October", strategy="keyword")
        assert hits and hits[0].path == "sessions/house.jsonl"
        assert hits[0].citation.startswith("sessions/house.jsonl#L")
    finally:
        memory.close()
