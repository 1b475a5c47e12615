"""Workspace files a sandboxed command planted: links out, magic links, FIFOs, devices, races."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from memory.core import MemoryCore
from memory.notes import MemoryPathError

from tests.races import flipping

SECRET = "sk-live-7f3e9a-memory-must-never-see-this"


@pytest.fixture
def core(make_settings, embedder, monkeypatch):
    monkeypatch.setenv("CRAYFISH_TEST_SECRET", SECRET)  # what /proc/self/environ now holds
    opened = MemoryCore(make_settings(), embedder).open()
    yield opened
    opened.close()


@pytest.fixture
def host_secret(tmp_path: Path) -> Path:
    secret = tmp_path / "host-secret.md"
    secret.write_text(f"# credentials\n\nThe deploy key is {SECRET}\n")
    return secret


def indexed_text(core: MemoryCore) -> str:
    return "\n".join(chunk.text for chunk in core.index.chunks.values())


def test_links_out_fifos_and_devices_are_skipped_with_a_reason(core, workspace, host_secret):
    memory = workspace / "memory"
    (memory / "environ.md").symlink_to("/proc/self/environ")
    (memory / "init.md").symlink_to("/proc/1/environ")
    (memory / "host.md").symlink_to(host_secret)
    (memory / "zero.md").symlink_to("/dev/zero")
    (memory / "relative.md").symlink_to("../../host-secret.md")
    os.mkfifo(memory / "pipe.md")

    report = core.sync()  # would block forever on the FIFO, or never end on /dev/zero

    assert set(report.skipped) == {
        "memory/environ.md",
        "memory/init.md",
        "memory/host.md",
        "memory/zero.md",
        "memory/relative.md",
        "memory/pipe.md",
    }
    assert "outside the workspace" in report.skipped["memory/host.md"]
    assert "not a regular file" in report.skipped["memory/pipe.md"]
    assert report.files_indexed == 4, "the user's own notes are still indexed"
    assert SECRET not in indexed_text(core)
    for hit in core.search("deploy key credentials", strategy="keyword"):
        assert hit.path not in report.skipped and SECRET not in hit.snippet
    assert core.stats().skipped == report.skipped, "stats report what the last sync left out"
    assert core.search("border collie")[0].path == "MEMORY.md"


def test_a_memory_folder_that_is_a_link_out_is_not_indexed(core, workspace, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "notes.md").write_text(f"leaked {SECRET}\n")
    real = workspace / "memory"
    real.rename(workspace / "old-memory")
    real.symlink_to(outside)

    report = core.sync()

    assert "memory" in report.skipped and "outside the workspace" in report.skipped["memory"]
    assert SECRET not in indexed_text(core)


def test_a_file_that_becomes_a_link_leaves_the_index(core, workspace, host_secret):
    core.sync()
    note = workspace / "memory/2026-05-02.md"
    note.unlink()
    note.symlink_to(host_secret)

    report = core.sync()

    assert report.files_removed == 1 and "memory/2026-05-02.md" in report.skipped
    assert not [h for h in core.search("Lisbon passport") if h.path == "memory/2026-05-02.md"]
    assert SECRET not in indexed_text(core)


def test_get_write_and_delete_never_go_through_a_link(core, workspace, host_secret):
    core.sync()
    planted = workspace / "memory/2026-06-01.md"
    planted.symlink_to(host_secret)
    before = host_secret.read_text()

    with pytest.raises(MemoryPathError, match="outside the workspace"):
        core.get("memory/2026-06-01.md")
    with pytest.raises(MemoryPathError, match="outside the workspace"):
        core.write("Remember the milk.", "memory/2026-06-01.md")
    assert host_secret.read_text() == before, "the link's target was written through"

    _, deleted = core.delete("memory/2026-06-01.md")
    assert deleted and not os.path.lexists(planted)
    assert host_secret.read_text() == before, "delete removes the link, never its target"


def test_write_creates_a_regular_file_and_indexes_it(core, workspace):
    core.sync()
    written = core.write("The plumber comes on Friday.", "memory/2026-06-02.md")
    path = workspace / written.path
    assert path.is_file() and not path.is_symlink()
    assert written.citation == "memory/2026-06-02.md#L3-L3"
    assert core.search("plumber Friday")[0].path == written.path


def read_race(core: MemoryCore) -> str:
    """What memory_get made of memory/race.md: "read" or "refused"; fails on a leak."""
    try:
        got = core.get("memory/race.md")
    except MemoryPathError as exc:
        assert "outside the workspace" in str(exc) and SECRET not in str(exc)
        return "refused"
    assert SECRET not in got.text
    return "read"


def sync_race(core: MemoryCore) -> str:
    """What a sync made of memory/race.md: "indexed" or "refused"; fails on a leak."""
    report = core.sync()
    assert SECRET not in indexed_text(core)
    for hit in core.search("deploy key", strategy="keyword"):
        assert SECRET not in hit.snippet
    if "outside the workspace" in report.skipped.get("memory/race.md", ""):
        return "refused"
    assert any(c.path == "memory/race.md" for c in core.index.chunks.values()), report
    return "indexed"


def test_a_link_swapped_in_between_listing_and_reading_never_leaks(core, workspace, host_secret):
    race = workspace / "memory/race.md"
    race.write_text("an ordinary note about the deploy key rotation\n")
    other = workspace / "memory/.race-link"  # not a note: only what flips into race.md is read
    other.symlink_to(host_secret)
    reads = {"read": 0, "refused": 0}
    syncs = {"indexed": 0, "refused": 0}
    with flipping(race, other):
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            reads[read_race(core)] += 1
        for done in range(1000):  # until the race was hit both ways, at least 20 syncs
            syncs[sync_race(core)] += 1
            if done >= 20 and min(syncs.values()) > 0:
                break
    # Both readers saw the file and the link: the flips happened while they read.
    assert min(reads.values()) > 0 and min(syncs.values()) > 0, (reads, syncs)
    print(f"\nmemory/race.md flipping to a link: memory_get {reads}; syncs {syncs}")
