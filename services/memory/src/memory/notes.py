"""Memory paths and notes: the file a path names, its lines, appending notes (never via a link)."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from crayfish_common.safe_files import FileRefused, SafeRoot

from memory.sources import SESSIONS_PREFIX, SourceFile

# A notes file is rewritten whole on each append; past this size, start a new file.
MAX_NOTE_FILE_BYTES = 8 * 1024 * 1024


class MemoryPathError(ValueError):
    """A path that is not one of memory's files (or tries to leave the workspace)."""


@contextlib.contextmanager
def refused_as_path_error() -> Iterator[None]:
    """A refused file is a missing one (FileNotFoundError) or a bad path (MemoryPathError)."""
    try:
        yield
    except FileRefused as exc:
        if exc.kind == "missing":
            raise FileNotFoundError(str(exc)) from None
        raise MemoryPathError(str(exc)) from None


@dataclass(frozen=True)
class LineRange:
    path: str
    text: str
    start_line: int
    end_line: int
    total_lines: int


@dataclass(frozen=True)
class WriteResult:
    """Where a note landed."""

    path: str
    start_line: int
    end_line: int

    @property
    def citation(self) -> str:
        return f"{self.path}#L{self.start_line}-L{self.end_line}"


def normalize(path: str) -> str:
    """Workspace-relative POSIX form of a memory path, or MemoryPathError."""
    clean = path.strip().split("#", 1)[0]
    while clean.startswith("./"):
        clean = clean[2:]
    pure = PurePosixPath(clean)
    if not clean or pure.is_absolute() or ".." in pure.parts:
        raise MemoryPathError(f"{path!r} is not a memory path (MEMORY.md or memory/...)")
    text = pure.as_posix()
    if text == "MEMORY.md" or text.startswith(SESSIONS_PREFIX):
        return text
    if text.startswith("memory/") and text.endswith(".md"):
        return text
    raise MemoryPathError(f"{path!r} is not a memory path (MEMORY.md or memory/**/*.md)")


def locate(workspace: SafeRoot, sessions: SafeRoot | None, path: str) -> SourceFile:
    """The memory file behind a cited path; opening it later keeps it beneath its root."""
    rel = normalize(path)
    if rel.startswith(SESSIONS_PREFIX):
        if sessions is None:
            raise MemoryPathError("session transcripts are not enabled (MEMORY_SESSIONS_DIR)")
        return SourceFile(rel, sessions, rel[len(SESSIONS_PREFIX) :], "sessions")
    return SourceFile(rel, workspace, rel, "memory")


def read_lines(lines: list[str], path: str, start_line: int, count: int, cap: int) -> LineRange:
    """Lines start_line.. (1-based) of a file, at most `cap` of them."""
    total = len(lines)
    start = max(1, start_line or 1)
    wanted = min(count if count > 0 else cap, cap)
    end = min(total, start + wanted - 1)
    text = "\n".join(lines[start - 1 : end]) if start <= total else ""
    return LineRange(path, text, start, max(end, start - 1), total)


def today_path(now: dt.datetime | None = None) -> str:
    day = (now or dt.datetime.now()).strftime("%Y-%m-%d")
    return f"memory/{day}.md"


def append_note(root: SafeRoot, rel: str, text: str, title: str) -> tuple[int, int]:
    """Appends `text` as its own paragraph; returns its 1-based first and last line.

    The file is replaced whole (temp file + rename), so a link planted at `rel` is refused and
    never written through.
    """
    body = text.strip("\n")
    if not body.strip():
        raise ValueError("nothing to write: the note is empty")
    try:
        existing = root.read_text(rel, MAX_NOTE_FILE_BYTES)
    except FileRefused as exc:
        if exc.kind != "missing":
            raise
        existing = ""
    prefix = f"# {title}\n\n" if not existing.strip() else ""
    if existing and not existing.endswith("\n"):
        existing += "\n"
    if existing.strip():
        prefix = "\n"
    before = (existing if existing.strip() else "") + prefix
    start = before.count("\n") + 1
    end = start + body.count("\n")
    root.write_atomic(rel, (before + body + "\n").encode("utf-8"), MAX_NOTE_FILE_BYTES)
    return start, end
