"""Bootstrap files read at every turn: kept texts are used only while the file is the one read,
and whatever a command puts in a kept file's place is read (and refused) anew."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from orchestrator.content.workspace import WorkspaceFiles

NAMES = ["AGENTS.md", "SOUL.md", "USER.md"]
SETTLED_NS = 50_000_000  # 50 ms instead of 1 s, so the test need not wait long


@pytest.fixture
def opened() -> list[str]:
    """The names the workspace opened, in order."""
    return []


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opened: list[str]) -> WorkspaceFiles:
    (tmp_path / "AGENTS.md").write_text("Be brief.")
    (tmp_path / "SOUL.md").write_text("Calm.")
    time.sleep(SETTLED_NS / 1e9 * 2)
    workspace = WorkspaceFiles(tmp_path, settled_ns=SETTLED_NS)
    read_stat = workspace.root.read_stat

    def counted(name: str, max_bytes: int) -> tuple[bytes, os.stat_result]:
        opened.append(name)
        return read_stat(name, max_bytes)

    monkeypatch.setattr(workspace.root, "read_stat", counted)
    return workspace


def texts(files: WorkspaceFiles) -> dict[str, str]:
    return {f.name: f.text or f.marker for f in asyncio.run(files.load(NAMES))}


def test_unchanged_files_are_not_opened_again(files: WorkspaceFiles, opened: list[str]) -> None:
    first = texts(files)
    assert first["AGENTS.md"] == "Be brief." and first["SOUL.md"] == "Calm."
    assert first["USER.md"] == "[missing: USER.md is not in the workspace]"
    assert sorted(opened) == sorted(NAMES)
    opened.clear()
    assert texts(files) == first
    assert opened == []


def test_a_rewrite_of_the_same_size_is_read(files: WorkspaceFiles, tmp_path: Path) -> None:
    texts(files)
    (tmp_path / "AGENTS.md").write_text("Be loud.!")  # same length, same second
    (tmp_path / "USER.md").write_text("Ada.")  # was missing
    now = texts(files)
    assert now["AGENTS.md"] == "Be loud.!" and now["USER.md"] == "Ada."
    assert now["SOUL.md"] == "Calm."


def test_a_file_just_written_is_not_kept(
    files: WorkspaceFiles, tmp_path: Path, opened: list[str]
) -> None:
    (tmp_path / "SOUL.md").write_text("Fresh.")  # changed within the settle time of its read
    assert texts(files)["SOUL.md"] == "Fresh."
    opened.clear()
    texts(files)
    assert "SOUL.md" in opened
    assert "AGENTS.md" not in opened


def test_a_link_or_fifo_put_in_a_kept_files_place_is_refused(
    files: WorkspaceFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-workspace-cache-0815"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    texts(files)
    (tmp_path / "AGENTS.md").unlink()
    (tmp_path / "AGENTS.md").symlink_to("/proc/self/environ")
    (tmp_path / "SOUL.md").unlink()
    os.mkfifo(tmp_path / "SOUL.md")
    now = texts(files)
    assert secret not in str(now)
    for name in ("AGENTS.md", "SOUL.md"):
        assert now[name] == f"[{name} skipped: not a regular file inside the workspace]"


def test_a_hard_link_made_to_a_kept_file_is_refused(files: WorkspaceFiles, tmp_path: Path) -> None:
    texts(files)
    os.link(tmp_path / "AGENTS.md", tmp_path / "elsewhere.md")
    skipped = "[AGENTS.md skipped: not a regular file inside the workspace]"
    assert texts(files)["AGENTS.md"] == skipped
