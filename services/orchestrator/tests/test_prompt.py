"""The system prompt: section order, modes, bootstrap caps and missing-file markers."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.agent.prompt import BOOTSTRAP_FILES, PromptInputs, build_system_prompt
from orchestrator.agent.turn_context import turn_context, with_turn_context, without_turn_context
from orchestrator.content.workspace import WorkspaceFiles

FULL_ORDER = [
    "You are crayfish",
    "## Tooling",
    "## Tool Call Style",
    "## Safety",
    "## Skills",
    "## Memory Recall",
    "## Silent Replies",
    "## Heartbeats",
    "## Workspace",
    "## Project Context",
    "## Runtime",
]


def inputs(workspace: Path, **overrides: object) -> PromptInputs:
    values: dict[str, object] = {
        "agent_name": "crayfish",
        "model": "test-model",
        "context_files": WorkspaceFiles(workspace).read_all(BOOTSTRAP_FILES),
        "tools": [("exec", "Runs a shell command in the sandbox."), ("read_file", "Reads a file.")],
        "skills_xml": "<available_skills><skill><name>git</name></skill></available_skills>",
        **overrides,
    }
    return PromptInputs(**values)  # type: ignore[arg-type]


def positions(prompt: str, markers: list[str]) -> list[int]:
    return [prompt.index(m) for m in markers]


def test_full_mode_has_every_section_in_order(tmp_path: Path) -> None:
    prompt = build_system_prompt(inputs(tmp_path))
    found = positions(prompt, FULL_ORDER)
    assert found == sorted(found)
    assert "- exec: Runs a shell command in the sandbox." in prompt
    assert "NO_REPLY" in prompt and "HEARTBEAT_OK" in prompt
    assert "model=test-model" in prompt


def test_the_prompt_has_no_clock_so_providers_can_cache_it(tmp_path: Path) -> None:
    """The time goes into the turn context at the end of the user message instead."""
    prompt = build_system_prompt(inputs(tmp_path))
    assert f"{datetime.now(UTC):%Y-%m-%d}" not in prompt
    assert prompt == build_system_prompt(inputs(tmp_path))
    context = turn_context("Europe/Lisbon", now=datetime(2026, 11, 30, 9, 15, tzinfo=UTC))
    assert context == "[Crayfish turn context] now=2026-11-30 09:15 (Monday) tz=Europe/Lisbon"
    message = with_turn_context("hello", turn_context("UTC", recall="[Memory recall: ...]"))
    assert message.startswith("hello\n\n[Crayfish turn context] now=")
    assert message.endswith("[Memory recall: ...]")
    assert without_turn_context(message) == "hello"
    assert without_turn_context("no context here") == "no context here"


def test_minimal_mode_drops_main_agent_sections(tmp_path: Path) -> None:
    """Background turns' prompt: they may still stay silent (NO_REPLY)."""
    prompt = build_system_prompt(inputs(tmp_path, mode="minimal"))
    for absent in ("## Memory Recall", "## Heartbeats"):
        assert absent not in prompt
    for present in ("## Tooling", "## Safety", "## Silent Replies", "## Project Context"):
        assert present in prompt


def test_none_mode_is_identity_only(tmp_path: Path) -> None:
    prompt = build_system_prompt(inputs(tmp_path, mode="none"))
    assert prompt.startswith("You are crayfish") and "##" not in prompt


def test_missing_bootstrap_files_are_marked(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("Be kind.")
    prompt = build_system_prompt(inputs(tmp_path))
    assert "### SOUL.md\nBe kind." in prompt
    assert "[missing: AGENTS.md is not in the workspace]" in prompt
    found = positions(prompt, [f"### {name}" for name in BOOTSTRAP_FILES])
    assert found == sorted(found)


def test_planted_links_fifos_and_devices_are_marked_never_read(tmp_path: Path, monkeypatch) -> None:
    secret = "sk-live-prompt-secret-4711"
    monkeypatch.setenv("OPENAI_API_KEY", secret)  # what /proc/self/environ now holds
    host_file = tmp_path.parent / f"{tmp_path.name}-host-secret.txt"
    host_file.write_text(f"token={secret}\n")
    (tmp_path / "AGENTS.md").symlink_to("/proc/self/environ")
    (tmp_path / "SOUL.md").symlink_to("/proc/1/environ")
    (tmp_path / "IDENTITY.md").symlink_to(host_file)
    (tmp_path / "USER.md").symlink_to(f"../{host_file.name}")
    (tmp_path / "TOOLS.md").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "HEARTBEAT.md")  # would block a plain open() for ever
    (tmp_path / "MEMORY.md").write_text("The user likes tea.")

    prompt = build_system_prompt(inputs(tmp_path))

    assert secret not in prompt
    for name in ("AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md", "HEARTBEAT.md"):
        assert f"### {name}\n[{name} skipped: not a regular file inside the workspace]" in prompt
    assert "### MEMORY.md\nThe user likes tea." in prompt


def test_an_oversized_bootstrap_file_is_skipped(tmp_path: Path) -> None:
    with (tmp_path / "AGENTS.md").open("wb") as big:
        big.truncate(3 * 1024 * 1024)  # sparse: 3 MiB of NUL bytes, over the read cap
    prompt = build_system_prompt(inputs(tmp_path))
    assert "[AGENTS.md skipped: larger than 2097152 bytes]" in prompt


def test_a_long_file_keeps_head_and_tail_within_its_cap(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("FIRST-LINE\n" + "filler line\n" * 5000 + "LAST-LINE")
    prompt = build_system_prompt(inputs(tmp_path, file_max_chars=2000))
    section = prompt.split("### AGENTS.md\n")[1].split("\n\n### SOUL.md")[0]
    assert len(section) <= 2000
    assert section.startswith("FIRST-LINE") and section.endswith("LAST-LINE")
    assert "chars cut here" in section


def test_the_total_cap_holds_across_files(tmp_path: Path) -> None:
    for name in BOOTSTRAP_FILES:
        (tmp_path / name).write_text(f"{name} " + "x" * 5000)
    prompt = build_system_prompt(inputs(tmp_path, file_max_chars=5000, total_max_chars=12_000))
    context = prompt.split("## Project Context\n")[1].split("\n\n## Runtime")[0]
    assert len(context) < 12_000 + 600  # headings and markers on top of the capped contents
    assert "[omitted: the project context cap of 12000 chars is used]" in context


def test_no_tools_says_so_instead_of_a_placeholder(tmp_path: Path) -> None:
    prompt = build_system_prompt(inputs(tmp_path, tools=[]))
    assert "No tools are available right now" in prompt
