"""Reading, appending to and deleting memory files, refusing paths outside memory's sources."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from memory.sources import SESSIONS_PREFIX


class MemoryPathError(ValueError):
    """A path that is not one of memory's files (or tries to leave the workspace)."""


@dataclass(frozen=True)
class LineRange:
    path: str
    text: str
    start_line: int
    end_line: int
    total_lines: int


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


def resolve(workspace: Path, sessions_dir: Path | None, path: str) -> Path:
    """The file behind a memory path, checked to stay inside its root."""
    rel = normalize(path)
    if rel.startswith(SESSIONS_PREFIX):
        if sessions_dir is None:
            raise MemoryPathError("session transcripts are not enabled (MEMORY_SESSIONS_DIR)")
        root, inner = sessions_dir, rel[len(SESSIONS_PREFIX) :]
    else:
        root, inner = workspace, rel
    target = root / inner
    resolved_root = root.resolve()
    if not target.resolve().is_relative_to(resolved_root):
        raise MemoryPathError(f"{path!r} leaves the workspace")
    return target


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


def append_note(file: Path, text: str, title: str) -> tuple[int, int]:
    """Appends `text` as its own paragraph; returns its 1-based first and last line."""
    body = text.strip("\n")
    if not body.strip():
        raise ValueError("nothing to write: the note is empty")
    file.parent.mkdir(parents=True, exist_ok=True)
    existing = file.read_text(encoding="utf-8") if file.exists() else ""
    prefix = f"# {title}\n\n" if not existing.strip() else ""
    if existing and not existing.endswith("\n"):
        existing += "\n"
    if existing.strip():
        prefix = "\n"
    before = (existing if existing.strip() else "") + prefix
    start = before.count("\n") + 1
    end = start + body.count("\n")
    with file.open("w", encoding="utf-8") as out:
        out.write(before + body + "\n")
    return start, end
