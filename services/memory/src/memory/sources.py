"""Which files memory indexes (MEMORY.md, memory/**/*.md, optional session transcripts)."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from crayfish_common.safe_files import FileRefused, SafeRoot

log = logging.getLogger(__name__)

SESSIONS_PREFIX = "sessions/"
MAX_FILE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class SourceFile:
    """A file to index: `path` as cited (workspace-relative, or sessions/...), `rel` in `root`."""

    path: str
    root: SafeRoot
    rel: str
    source: str = "memory"


@dataclass
class Discovery:
    """The files found, and the reasons for what was found but left out."""

    files: dict[str, SourceFile] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def discover(workspace: SafeRoot, sessions: SafeRoot | None = None) -> Discovery:
    """Every indexable file by cited path; links and FIFOs are listed, never opened here.

    Reading (`read_bytes`) decides: a link leaving its root or a FIFO is refused with a reason.
    """
    found = Discovery()
    if os.path.lexists(workspace.root / "MEMORY.md"):
        found.files["MEMORY.md"] = SourceFile("MEMORY.md", workspace, "MEMORY.md", "memory")
    _list(found, workspace, "memory", ".md", "", "memory")
    if sessions is not None:
        _list(found, sessions, ".", ".jsonl", SESSIONS_PREFIX, "sessions")
    return found


def _list(found: Discovery, root: SafeRoot, folder: str, suffix: str, cite: str, kind: str) -> None:
    try:
        names = root.files(folder, suffix, special=True)
    except FileRefused as exc:
        found.skipped[cite + folder] = str(exc)
        return
    for rel in names:
        found.files[cite + rel] = SourceFile(cite + rel, root, rel, kind)


def read_bytes(source: SourceFile) -> bytes:
    """The file's bytes (its head when huge); FileRefused for links out, FIFOs, devices."""
    data, whole = source.root.read_head(source.rel, MAX_FILE_BYTES)
    if not whole:
        log.warning("%s is larger than %d bytes; indexing its head", source.path, MAX_FILE_BYTES)
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
