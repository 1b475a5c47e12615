"""Heartbeats: nothing listed means no LLM call; acknowledgements are not delivered."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from orchestrator.core import OrchestratorCore
from orchestrator.schedules.heartbeat import heartbeat_tasks, is_acknowledgement
from orchestrator.store.turns import Turn

from tests.fakes import FakeLLM
from tests.postgres import fresh_database


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


async def heartbeat_tasks_of(core: OrchestratorCore) -> list[Turn]:
    """Every heartbeat turn in the store, oldest first."""
    events = await core.turns.events.all_events(0)
    ids = dict.fromkeys(e.task_id for e in events if e.data.get("kind") == "heartbeat")
    return [turn for task_id in ids if (turn := await core.turns.get(task_id))]


async def test_the_schedule_runs_heartbeats_and_drops_ok(
    core_factory, fake_llm: FakeLLM, tmp_path: Path
):
    fake_llm.reply_forever_text("HEARTBEAT_OK")
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "HEARTBEAT.md").write_text("- Check the backups\n")
    core: OrchestratorCore = await core_factory(CRAYFISH_HEARTBEAT_INTERVAL=0.1)
    for _ in range(100):
        done = [t for t in await heartbeat_tasks_of(core) if t.done]
        if done:
            break
        await asyncio.sleep(0.05)
    assert done and done[0].status == "completed"
    assert done[0].delivered is False and done[0].result == ""
    assert "Check the backups" in fake_llm.requests[0]["messages"][-1]["content"]


async def test_heartbeats_fire_once_across_replicas(
    core_factory, fake_llm: FakeLLM, tmp_path: Path
):
    fake_llm.reply_forever_text("HEARTBEAT_OK")
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "HEARTBEAT.md").write_text("- Check the backups\n")
    replicas = [await core_factory(CRAYFISH_HEARTBEAT_INTERVAL=0.3) for _ in range(3)]
    await asyncio.sleep(2.0)
    fired = await heartbeat_tasks_of(replicas[0])
    # Three replicas ticking every 0.3 s: one heartbeat per 0.3 s at most, not one per replica.
    assert 2 <= len(fired) <= 2.0 / (0.3 * 0.9) + 1, len(fired)


async def heartbeat_due_at(core: OrchestratorCore) -> float | None:
    """When the heartbeat is next due: each tick of the loop that fires it moves this on."""
    async with core.db.connection() as conn:
        cursor = await conn.execute(
            "SELECT next_run FROM scheduled_turns WHERE id = 'heartbeat' AND builtin"
        )
        row = await cursor.fetchone()
    return None if row is None else float(row["next_run"])


async def test_the_schedule_skips_the_llm_without_tasks(
    core_factory, fake_llm: FakeLLM, tmp_path: Path
):
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "HEARTBEAT.md").write_text(
        "# HEARTBEAT.md\n\n<!-- List periodic checks here.\n- not this one -->\n-\n"
    )
    core: OrchestratorCore = await core_factory(CRAYFISH_HEARTBEAT_INTERVAL=0.05)
    due_times: set[float] = set()
    deadline = asyncio.get_running_loop().time() + 30
    # A third due time: the loop fired twice and looked at HEARTBEAT.md after each firing.
    while len(due_times) < 3:
        assert asyncio.get_running_loop().time() < deadline, f"the loop fired {len(due_times)}x"
        if (due := await heartbeat_due_at(core)) is not None:
            due_times.add(due)
        await asyncio.sleep(0.02)
    assert fake_llm.requests == [] and not await heartbeat_tasks_of(core)


@pytest.mark.parametrize("plant", ["fifo", "environ", "dev-zero"])
async def test_a_planted_heartbeat_file_is_skipped_without_blocking(
    core_factory, fake_llm: FakeLLM, plant: str
):
    core: OrchestratorCore = await core_factory()
    path = core.settings.workspace / "HEARTBEAT.md"
    if plant == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/proc/self/environ" if plant == "environ" else "/dev/zero")
    assert await asyncio.wait_for(core.trigger_heartbeat(), timeout=10) is None
    assert fake_llm.requests == [], "a refused HEARTBEAT.md lists no tasks: no LLM call"


BOOTSTRAP = {
    "AGENTS.md": "# AGENTS.md\nWork in small steps. Keep notes in memory/.\n" * 10,
    "SOUL.md": "# SOUL.md\nBe warm, direct and brief. Prefer plain words.\n" * 15,
    "USER.md": "# USER.md\nName: Ana. Lives in Lisbon. Likes long walks, hates spam.\n" * 15,
    "MEMORY.md": "# MEMORY.md\n- 2026-11-02: the backup disk is /mnt/backup\n" * 30,
    "HEARTBEAT.md": "# HEARTBEAT.md\n- Check the backups\n",
}


async def heartbeat_input_tokens(core: OrchestratorCore) -> int:
    """The prompt tokens of one heartbeat's LLM requests, as the provider counted them."""
    turn = await core.trigger_heartbeat()
    assert turn is not None
    assert (await core.turns.wait(turn.id, 30)).status == "completed"
    report = await core.usage_report("kind", None, None)
    (row,) = [r for r in report["rows"] if r["key"] == "heartbeat"]
    return int(row["prompt_tokens"])


async def test_a_heartbeat_sends_the_lighter_prompt(core_factory, fake_llm: FakeLLM, tmp_path):
    """Background turns run with the minimal prompt (CRAYFISH_BACKGROUND_PROMPT): the input
    tokens of one heartbeat, measured with the fake provider's usage, before and after."""
    fake_llm.reply_forever_text("HEARTBEAT_OK")
    (tmp_path / "workspace").mkdir()
    for name, text in BOOTSTRAP.items():
        (tmp_path / "workspace" / name).write_text(text)
    before = await heartbeat_input_tokens(
        await core_factory(
            CRAYFISH_BACKGROUND_PROMPT="full", CRAYFISH_DATABASE_URL=fresh_database()
        )
    )
    full_request = fake_llm.requests[-1]["messages"][0]["content"]
    after = await heartbeat_input_tokens(await core_factory())
    light_request = fake_llm.requests[-1]["messages"][0]["content"]
    print(f"\nheartbeat input tokens: full prompt {before}, minimal prompt {after}")
    assert "Name: Ana" in full_request and "Name: Ana" not in light_request
    assert "## Memory Recall" not in light_request and "Work in small steps" in light_request
    assert after < before / 2
