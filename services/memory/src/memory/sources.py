"""Which files memory indexes (MEMORY.md, memory/**/*.md, optional session transcripts)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SESSIONS_PREFIX = "sessions/"
MAX_FILE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class SourceFile:
    """A file to index: `path` as cited (workspace-relative, or sessions/...)."""

    path: str
    file: Path
    source: str = "memory"


def discover(workspace: Path, sessions_dir: Path | None = None) -> dict[str, SourceFile]:
    """Every indexable file by cited path; symlinks out of the workspace are skipped."""
    found: dict[str, SourceFile] = {}
    root = workspace.resolve()
    candidates = [workspace / "MEMORY.md"]
    memory_dir = workspace / "memory"
    if memory_dir.is_dir():
        candidates += sorted(memory_dir.rglob("*.md"))
    for file in candidates:
        if not file.is_file() or not _inside(file, root):
            continue
        rel = file.relative_to(workspace).as_posix()
        found[rel] = SourceFile(rel, file, "memory")
    if sessions_dir is not None and sessions_dir.is_dir():
        sroot = sessions_dir.resolve()
        for file in sorted(sessions_dir.rglob("*.jsonl")):
            if file.is_file() and _inside(file, sroot):
                rel = SESSIONS_PREFIX + file.relative_to(sessions_dir).as_posix()
                found[rel] = SourceFile(rel, file, "sessions")
    return found


def _inside(file: Path, root: Path) -> bool:
    try:
        return file.resolve().is_relative_to(root)
    except OSError:
        return False


def read_bytes(source: SourceFile) -> bytes:
    data = source.file.read_bytes()
    if len(data) > MAX_FILE_BYTES:
        log.warning("%s is larger than %d bytes; indexing its head", source.path, MAX_FILE_BYTES)
        data = data[:MAX_FILE_BYTES]
    return data


def to_lines(source: SourceFile, data: bytes) -> list[str]:
    """The file's lines; a transcript's JSONL lines become 'role: text' (others stay blank)."""
    text = data.decode("utf-8", errors="replace")
    lines = text.splitlines()
    if source.source != "sessions":
        return lines
    return [_transcript_line(line) for line in lines]


def _transcript_line(raw: str) -> str:
    try:
        record = json.loads(raw)
    except ValueError:
        return ""
    if not isinstance(record, dict):
        return ""
    nested = record.get("message")
    message: dict[str, Any] = nested if isinstance(nested, dict) else record
    role = message.get("role")
    if role not in ("user", "assistant"):
        return ""
    content = message.get("content")
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        content = " ".join(p for p in parts if isinstance(p, str))
    if not isinstance(content, str) or not content.strip():
        return ""
    return f"{role}: {' '.join(content.split())}"
