"""Heartbeats: nothing listed means no LLM call; acknowledgements are not delivered."""

from __future__ import annotations

import asyncio
import os

import pytest
from orchestrator.core import OrchestratorCore
from orchestrator.heartbeat import heartbeat_tasks, is_acknowledgement

from tests.fakes import FakeLLM


def test_comments_headings_and_blank_bullets_are_not_tasks() -> None:
    assert heartbeat_tasks("# HEARTBEAT\n\n<!-- add tasks\n- here -->\n-\n## Later\n") == ""
    assert heartbeat_tasks("# HEARTBEAT\n- Water the plants on Mondays\n") == (
        "- Water the plants on Mondays"
    )


def test_acknowledgements() -> None:
    assert is_acknowledgement("HEARTBEAT_OK")
    assert is_acknowledgement("All quiet. HEARTBEAT_OK")
    assert not is_acknowledgement("HEARTBEAT_OK " + "but here is a long report. " * 20)
    assert not is_acknowledgement("The plants need water today.")


async def test_the_schedule_runs_heartbeats_and_drops_ok(core_factory, fake_llm: FakeLLM):
    fake_llm.reply_forever_text("HEARTBEAT_OK")
    core: OrchestratorCore = core_factory(CRAYFISH_HEARTBEAT_INTERVAL=0.1)
    (core.settings.workspace / "HEARTBEAT.md").write_text("- Check the backups\n")
    core.start_heartbeats()
    for _ in range(100):
        done = [t for t in core.tasks.tasks.values() if t.kind == "heartbeat" and t.done]
        if done:
            break
        await asyncio.sleep(0.05)
    assert done and done[0].status == "completed"
    assert done[0].delivered is False and done[0].result == ""
    assert "Check the backups" in fake_llm.requests[0]["messages"][-1]["content"]


async def test_the_schedule_skips_the_llm_without_tasks(core_factory, fake_llm: FakeLLM):
    core: OrchestratorCore = core_factory(CRAYFISH_HEARTBEAT_INTERVAL=0.05)
    core.start_heartbeats()
    await asyncio.sleep(0.4)
    assert fake_llm.requests == [] and not core.tasks.tasks


@pytest.mark.parametrize("plant", ["fifo", "environ", "dev-zero"])
async def test_a_planted_heartbeat_file_is_skipped_without_blocking(
    core_factory, fake_llm: FakeLLM, plant: str
):
    core: OrchestratorCore = core_factory()
    path = core.settings.workspace / "HEARTBEAT.md"
    if plant == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/proc/self/environ" if plant == "environ" else "/dev/zero")
    assert await asyncio.wait_for(core.trigger_heartbeat(), timeout=10) is None
    assert fake_llm.requests == [], "a refused HEARTBEAT.md lists no tasks: no LLM call"
