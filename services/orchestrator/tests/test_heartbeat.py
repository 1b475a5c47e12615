"""Heartbeats: nothing listed means no LLM call; acknowledgements are not delivered."""

from __future__ import annotations

import asyncio
from pathlib import Path

from orchestrator.heartbeat import heartbeat_tasks, is_acknowledgement
from orchestrator.runtime import Runtime

from tests.fakes import FakeLLM


def test_comments_headings_and_blank_bullets_are_not_tasks(tmp_path: Path) -> None:
    (tmp_path / "HEARTBEAT.md").write_text(
        "# HEARTBEAT\n\n<!-- add tasks\n- here -->\n-\n## Later\n"
    )
    assert heartbeat_tasks(tmp_path) == ""
    (tmp_path / "HEARTBEAT.md").write_text("# HEARTBEAT\n- Water the plants on Mondays\n")
    assert heartbeat_tasks(tmp_path) == "- Water the plants on Mondays"
    assert heartbeat_tasks(tmp_path / "missing") == ""


def test_acknowledgements() -> None:
    assert is_acknowledgement("HEARTBEAT_OK")
    assert is_acknowledgement("All quiet. HEARTBEAT_OK")
    assert not is_acknowledgement("HEARTBEAT_OK " + "but here is a long report. " * 20)
    assert not is_acknowledgement("The plants need water today.")


async def test_the_schedule_runs_heartbeats_and_drops_ok(runtime_factory, fake_llm: FakeLLM):
    fake_llm.reply_forever_text("HEARTBEAT_OK")
    runtime: Runtime = runtime_factory(CRAYFISH_HEARTBEAT_INTERVAL=0.1)
    (runtime.settings.workspace / "HEARTBEAT.md").write_text("- Check the backups\n")
    runtime.start_heartbeats()
    for _ in range(100):
        done = [t for t in runtime.tasks.tasks.values() if t.kind == "heartbeat" and t.done]
        if done:
            break
        await asyncio.sleep(0.05)
    assert done and done[0].status == "completed"
    assert done[0].delivered is False and done[0].result == ""
    assert "Check the backups" in fake_llm.requests[0]["messages"][-1]["content"]


async def test_the_schedule_skips_the_llm_without_tasks(runtime_factory, fake_llm: FakeLLM):
    runtime: Runtime = runtime_factory(CRAYFISH_HEARTBEAT_INTERVAL=0.05)
    runtime.start_heartbeats()
    await asyncio.sleep(0.4)
    assert fake_llm.requests == [] and not runtime.tasks.tasks
