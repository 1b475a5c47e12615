"""The shared safe-open helper: listing without following links, capped reads, remove, write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from crayfish_common.safe_files import MAX_DEPTH, FileRefused, SafeRoot


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    (folder / "notes/deep").mkdir(parents=True)
    (folder / "notes/a.md").write_text("a")
    (folder / "notes/deep/b.md").write_text("b")
    (folder / "notes/skip.txt").write_text("not markdown")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    (folder / "notes/out").symlink_to(outside)  # a folder link: never walked into
    (folder / "notes/link.md").symlink_to(outside / "secret.md")
    os.mkfifo(folder / "notes/pipe.md")
    return folder


def test_files_lists_regular_files_and_never_walks_a_link(root: Path):
    safe = SafeRoot(root)
    assert safe.files("notes", ".md") == ["notes/a.md", "notes/deep/b.md"]
    special = safe.files("notes", ".md", special=True)
    assert special == ["notes/a.md", "notes/deep/b.md", "notes/link.md", "notes/pipe.md"]
    assert safe.files("missing") == []
    with pytest.raises(FileRefused) as refused:
        safe.files("notes/out")
    assert refused.value.kind == "outside"


def test_a_planted_deep_tree_ends_the_walk(root: Path):
    deep = root / "notes"
    for _ in range(MAX_DEPTH + 5):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "bottom.md").write_text("x")
    assert not any(p.endswith("bottom.md") for p in SafeRoot(root).files("notes", ".md"))


def test_reads_are_capped_and_refuse_what_is_not_a_regular_file(root: Path):
    safe = SafeRoot(root)
    (root / "big.md").write_bytes(b"x" * 5000)
    assert safe.read_head("big.md", 1000) == (b"x" * 1000, False)
    assert safe.read_head("notes/a.md", 1000) == (b"a", True)
    with pytest.raises(FileRefused) as too_big:
        safe.read_bytes("big.md", 1000)
    assert too_big.value.kind == "too_large"
    for path, kind in [
        ("notes/link.md", "outside"),
        ("notes/pipe.md", "not_regular"),
        ("notes", "not_regular"),
        ("nothing.md", "missing"),
        ("/etc/passwd", "outside"),
    ]:
        with pytest.raises(FileRefused) as refused:
            safe.read_text(path, 1000)
        assert refused.value.kind == kind, path


def test_remove_unlinks_a_link_never_its_target(root: Path, tmp_path: Path):
    safe = SafeRoot(root)
    assert safe.remove("notes/link.md") is True
    assert not os.path.lexists(root / "notes/link.md")
    assert (tmp_path / "outside/secret.md").read_text() == "secret"
    assert safe.remove("notes/link.md") is False
    with pytest.raises(FileRefused):
        safe.remove("notes/out/secret.md")  # through a folder link: refused
    assert (tmp_path / "outside/secret.md").exists()


def test_write_atomic_creates_folders_and_refuses_to_write_through_a_link(
    root: Path, tmp_path: Path
):
    safe = SafeRoot(root)
    assert safe.write_atomic("new/dir/note.md", b"hello", 100) is True
    assert (root / "new/dir/note.md").read_bytes() == b"hello"
    assert safe.write_atomic("new/dir/note.md", b"again", 100) is False
    with pytest.raises(FileRefused, match="symbolic link"):
        safe.write_atomic("notes/link.md", b"overwrite", 100)
    with pytest.raises(FileRefused):
        safe.write_atomic("notes/out/secret.md", b"overwrite", 100)
    assert (tmp_path / "outside/secret.md").read_text() == "secret"
    assert not [p for p in os.listdir(root / "new/dir") if p.endswith(".tmp")]
