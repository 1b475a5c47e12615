"""Workspace files the orchestrator reads (bootstrap files, HEARTBEAT.md): hostile input.

A sandboxed command can replace any of them with a link to `/proc/self/environ`, a FIFO or a
device between two turns; every read goes through the shared safe-open helper, in a worker
thread, and a refused file becomes a marker instead of its content.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from crayfish_common.safe_files import FileRefused, SafeRoot

log = logging.getLogger(__name__)

# Read cap per file; the prompt keeps far less of it (head and tail, DESIGN §2).
MAX_FILE_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class WorkspaceFile:
    """A file's text, or None with the marker shown in its place."""

    name: str
    text: str | None
    marker: str = ""


class WorkspaceFiles:
    """Reads named files from the workspace's top folder, never following a link out of it."""

    def __init__(self, root: Path, max_bytes: int = MAX_FILE_BYTES):
        self.root = SafeRoot(root)
        self.max_bytes = max_bytes

    def read(self, name: str) -> WorkspaceFile:
        try:
            return WorkspaceFile(name, self.root.read_text(name, self.max_bytes))
        except FileRefused as exc:
            if exc.kind == "missing":
                return WorkspaceFile(name, None, f"[missing: {name} is not in the workspace]")
            log.warning("workspace file refused: %s", exc)
            if exc.kind == "too_large":
                why = f"larger than {self.max_bytes} bytes"
            else:
                why = "not a regular file inside the workspace"
            return WorkspaceFile(name, None, f"[{name} skipped: {why}]")

    def read_all(self, names: Iterable[str]) -> list[WorkspaceFile]:
        return [self.read(name) for name in names]

    async def load(self, names: Iterable[str]) -> list[WorkspaceFile]:
        """`read_all` in a worker thread: a slow disk never stalls the event loop."""
        return await asyncio.to_thread(self.read_all, list(names))
