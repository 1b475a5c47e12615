"""The files memory keeps a history of (MEMORY.md, USER.md, SOUL.md, memory/**/*.md)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from crayfish_common.safe_files import FileRefused, SafeRoot

from memory.notes import MAX_NOTE_FILE_BYTES, MemoryPathError

log = logging.getLogger(__name__)

TOP_FILES = ("MEMORY.md", "USER.md", "SOUL.md")


def tracked_path(path: str) -> str:
    """Workspace-relative form of a file the memory tools may change, or MemoryPathError."""
    clean = path.strip().split("#", 1)[0]
    while clean.startswith("./"):
        clean = clean[2:]
    pure = PurePosixPath(clean)
    if clean and not pure.is_absolute() and ".." not in pure.parts:
        text = pure.as_posix()
        if text in TOP_FILES or (text.startswith("memory/") and text.endswith(".md")):
            return text
    raise MemoryPathError(f"{path!r} is not MEMORY.md, USER.md, SOUL.md or memory/....md")


@dataclass
class Snapshot:
    """The tracked files now: path -> bytes, and those present but unreadable, with the reason."""

    files: dict[str, bytes] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)


def read_tracked(root: SafeRoot, rel: str) -> bytes | None:
    """A tracked file's bytes; None when absent; FileRefused for a link out, FIFO, huge file."""
    try:
        return root.read_bytes(rel, MAX_NOTE_FILE_BYTES)
    except FileRefused as exc:
        if exc.kind == "missing":
            return None
        raise


def scan(root: SafeRoot) -> Snapshot:
    """Every tracked file of the workspace; links and FIFOs are refused, never followed."""
    found = Snapshot()
    if not os.path.isdir(root.root):
        raise FileNotFoundError(f"workspace {root.root} is missing")
    names = [n for n in TOP_FILES if os.path.lexists(root.root / n)]
    try:
        names += root.files("memory", ".md", special=True)
    except FileRefused as exc:
        found.refused["memory"] = str(exc)
    for rel in names:
        try:
            data = read_tracked(root, rel)
        except FileRefused as exc:
            found.refused[rel] = str(exc)
            continue
        if data is not None:
            found.files[rel] = data
    return found
