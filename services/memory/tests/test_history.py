"""Versioned memory: every change to memory's files is a git revision with author and reason."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from crayfish_common.tools import CallContext
from memory.core import MemoryCore
from memory.history import RevisionNotFound
from memory.notes import MemoryPathError
from memory.tools import memory_tools


@pytest.fixture
def core(make_settings, embedder) -> Iterator[MemoryCore]:
    opened = MemoryCore(make_settings(), embedder).open()
    opened.sync()
    yield opened
    opened.close()


def git_log(data_dir: Path) -> list[str]:
    """The history as the git CLI reads it: the repository is real git."""
    out = subprocess.run(
        ["git", "--git-dir", str(data_dir / "history"), "log", "--format=%an|%s"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.splitlines()


async def run_tool(core: MemoryCore, name: str, args: dict, session: str = "s-42") -> str:
    result = await memory_tools(core).run(name, json.dumps(args), CallContext(session_id=session))
    assert result.ok, result.output
    return result.output


def test_first_sync_records_the_files_as_found_outside_the_workspace(core, tmp_path, workspace):
    [first] = core.history()
    assert first.author == "hand"
    assert "MEMORY.md" in first.files and "memory/projects/garden.md" in first.files
    assert git_log(tmp_path / "data") == ["hand|history started: the files as found"]
    assert not any(p.name in ("HEAD", "objects") for p in workspace.rglob("*"))


async def test_tools_write_and_edit_as_the_calling_session_with_reason(core, workspace):
    await run_tool(core, "memory_write", {"text": "- Likes jazz.", "path": "USER.md"})
    out = await run_tool(
        core,
        "memory_edit",
        {
            "path": "MEMORY.md",
            "old_text": "green tea",
            "new_text": "oolong tea",
            "reason": "stated in session s-7",
        },
    )
    assert out.startswith("Edited MEMORY.md")
    edit, write = core.history()[:2]
    assert (edit.author, edit.reason, edit.files) == (
        "session:s-42",
        "stated in session s-7",
        ["MEMORY.md"],
    )
    assert (write.author, write.files) == ("session:s-42", ["USER.md"])
    assert "oolong tea" in (workspace / "MEMORY.md").read_text()
    diff = core.revision(edit.rev[:8]).diff
    assert "-- The user prefers green tea over coffee." in diff
    assert "+- The user prefers oolong tea over coffee." in diff
    assert core.search("oolong", strategy="keyword")[0].path == "MEMORY.md"


@pytest.mark.parametrize(
    ("old", "error"),
    [("nowhere in the file", "was not found"), ("The user", "occurs 2 times"), ("", "empty")],
)
async def test_an_edit_that_is_not_one_exact_occurrence_changes_nothing(
    core, workspace, old, error
):
    before = (workspace / "MEMORY.md").read_text()
    result = await memory_tools(core).run(
        "memory_edit",
        json.dumps({"path": "MEMORY.md", "old_text": old, "new_text": "x", "reason": "r"}),
        CallContext(session_id="s"),
    )
    assert not result.ok and error in result.output
    assert (workspace / "MEMORY.md").read_text() == before
    assert len(core.history()) == 1


@pytest.mark.parametrize("path", ["TOOLS.md", "notes.md", "memory/a.txt", "../MEMORY.md", "/etc/x"])
def test_edit_and_write_refuse_files_outside_memory(core, path):
    with pytest.raises(MemoryPathError):
        core.edit(path, "a", "b", "api", "r")
    with pytest.raises(MemoryPathError):
        core.write("a", path)


def test_a_hand_edit_is_recorded_before_the_tools_next_change(core, workspace):
    memory = workspace / "MEMORY.md"
    memory.write_text(memory.read_text() + "- Hand-written line.\n")
    core.write("- From the API.", "MEMORY.md", reason="api note")
    api, hand = core.history()[:2]
    assert (hand.author, hand.files) == ("hand", ["MEMORY.md"])
    assert "+- Hand-written line." in core.revision(hand.rev).diff
    assert "+- Hand-written" not in core.revision(api.rev).diff
    assert (api.author, api.reason) == ("api", "api note")


def test_a_scan_records_hand_edits_and_deletions(core, workspace):
    (workspace / "USER.md").write_text("# User\n\nName: Ada\n")
    (workspace / "memory/2026-05-02.md").unlink()
    core.sync()
    latest = core.history()[0]
    assert latest.author == "hand"
    assert latest.files == ["USER.md", "memory/2026-05-02.md"]
    assert core.sync() and core.history()[0].rev == latest.rev  # nothing new, no revision


def test_restore_brings_back_the_files_and_the_index_follows(core, workspace):
    good = core.history()[0].rev
    core.edit("MEMORY.md", "border collie named Biscuit", "cat named Tom", "api", "bad edit")
    core.write("- Scratch.", "memory/scratch.md")
    assert core.search("Biscuit", strategy="keyword") == []
    done = core.restore(good)
    assert done.source == good and done.files == ["MEMORY.md", "memory/scratch.md"]
    assert done.revision is not None and done.revision.author == "api"
    assert done.revision.reason == f"restore the files as at {good[:12]}"
    assert "Biscuit" in (workspace / "MEMORY.md").read_text()
    assert not (workspace / "memory/scratch.md").exists()
    assert core.search("Biscuit", strategy="keyword")[0].path == "MEMORY.md"
    assert core.restore(good).revision is None  # already as it was


def test_restoring_one_file_leaves_the_others_as_they_are(core, workspace):
    good = core.history()[0].rev
    core.edit("MEMORY.md", "green tea", "black coffee", "session:s-1", "bad consolidation")
    core.write("- Passport renewed.", "memory/2026-05-02.md", "session:s-2", "later note")
    done = core.restore(good, path="MEMORY.md")
    assert done.files == ["MEMORY.md"]
    assert done.revision is not None
    assert done.revision.reason == f"restore MEMORY.md as at {good[:12]}"
    assert "green tea" in (workspace / "MEMORY.md").read_text()
    assert "Passport renewed" in (workspace / "memory/2026-05-02.md").read_text()
    with pytest.raises(MemoryPathError):
        core.restore(good, path="TOOLS.md")


def test_unknown_and_malformed_revisions_are_refused(core):
    with pytest.raises(RevisionNotFound):
        core.revision("0" * 40)
    with pytest.raises(RevisionNotFound):
        core.restore("abcdef12")
    with pytest.raises(ValueError):
        core.revision("HEAD~1; rm -rf /")


def test_links_and_fifos_in_the_workspace_are_never_followed(core, workspace, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("password=hunter2\n")
    (workspace / "USER.md").symlink_to(secret)
    os.mkfifo(workspace / "memory" / "pipe.md")
    (workspace / "MEMORY.md").unlink()
    (workspace / "MEMORY.md").symlink_to(secret)
    core.sync()  # returns: the FIFO is never opened for reading
    for revision in core.history():
        assert "hunter2" not in core.revision(revision.rev).diff
    # A restore replaces the planted link itself, and leaves the link's target alone.
    core.restore(core.history()[-1].rev)
    assert not (workspace / "MEMORY.md").is_symlink()
    assert "Biscuit" in (workspace / "MEMORY.md").read_text()
    assert secret.read_text() == "password=hunter2\n"


def test_a_large_first_revision_is_packed_and_git_reads_it(make_settings, embedder, workspace):
    for n in range(40):
        (workspace / "memory" / f"n-{n}.md").write_text(f"# Note {n}\n\nFact number {n}.\n")
    opened = MemoryCore(make_settings(watch=False), embedder).open()
    try:
        opened.sync()
        repo = str(opened.settings.data_dir / "history")
        assert list((opened.settings.data_dir / "history" / "objects" / "pack").glob("*.pack"))
        subprocess.run(["git", "--git-dir", repo, "fsck", "--strict"], check=True)
        shown = subprocess.run(
            ["git", "--git-dir", repo, "show", "HEAD:memory/n-39.md"],
            check=True,
            capture_output=True,
            text=True,
        )
        assert shown.stdout == "# Note 39\n\nFact number 39.\n"
    finally:
        opened.close()


def test_a_huge_file_keeps_its_last_readable_version(core, workspace):
    before = core.history()[0].rev
    (workspace / "MEMORY.md").write_bytes(b"x" * (9 * 1024 * 1024))
    core.sync()
    assert core.history()[0].rev == before  # neither stored nor taken for a deletion
    assert "MEMORY.md" in core.versioned.history.files_at(before)[1]
    assert "Biscuit" in core.versioned.history.files_at(before)[1]["MEMORY.md"].decode()
