"""Workspace files the orchestrator reads (bootstrap files, HEARTBEAT.md): hostile input.

A sandboxed command can replace any of them with a link to `/proc/self/environ`, a FIFO or a
device between two turns; every read goes through the shared safe-open helper, in a worker
thread, and a refused file becomes a marker instead of its content.

The bootstrap files are read at every turn and seldom change, so their texts are kept: a kept
text is used while the name's status (taken without following links) is the one its read saw.
A link, FIFO or device put in its place has another status, so it is opened, and refused,
like any unknown file. Only files last changed over `SETTLED_NS` before their read are kept:
a write within the file system's timestamp granularity of the read would not change it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from crayfish_common.safe_files import FileRefused, SafeRoot

log = logging.getLogger(__name__)

# Read cap per file; the prompt keeps far less of it (head and tail, DESIGN §2).
MAX_FILE_BYTES = 2 * 1024 * 1024
# How long before its read a kept file must have last changed (coarse timestamps tick ~4 ms).
SETTLED_NS = 1_000_000_000

# What identifies a version of a file: any write, rename, link or chmod changes one of these.
Signature = tuple[int, int, int, int, int, int, int]


def signature(info: os.stat_result) -> Signature:
    return (
        info.st_dev,
        info.st_ino,
        info.st_mode,
        info.st_nlink,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
    )


@dataclass(frozen=True)
class WorkspaceFile:
    """A file's text, or None with the marker shown in its place."""

    name: str
    text: str | None
    marker: str = ""


class WorkspaceFiles:
    """Reads named files from the workspace's top folder, never following a link out of it."""

    def __init__(self, root: Path, max_bytes: int = MAX_FILE_BYTES, settled_ns: int = SETTLED_NS):
        self.root = SafeRoot(root)
        self.max_bytes = max_bytes
        self.settled_ns = settled_ns
        self._kept: dict[str, tuple[Signature | None, WorkspaceFile]] = {}  # None: missing

    def read(self, name: str) -> WorkspaceFile:
        try:
            data, info = self.root.read_stat(name, self.max_bytes)
        except FileRefused as exc:
            self._kept.pop(name, None)
            if exc.kind == "missing":
                missing = WorkspaceFile(name, None, f"[missing: {name} is not in the workspace]")
                if "/" not in name:
                    self._kept[name] = (None, missing)
                return missing
            log.warning("workspace file refused: %s", exc)
            if exc.kind == "too_large":
                why = f"larger than {self.max_bytes} bytes"
            else:
                why = "not a regular file inside the workspace"
            return WorkspaceFile(name, None, f"[{name} skipped: {why}]")
        read = WorkspaceFile(name, data.decode("utf-8", errors="replace"))
        changed = max(info.st_mtime_ns, info.st_ctime_ns)
        if "/" not in name and time.time_ns() - changed > self.settled_ns:
            self._kept[name] = (signature(info), read)
        else:
            self._kept.pop(name, None)
        return read

    def read_all(self, names: Iterable[str]) -> list[WorkspaceFile]:
        return [self.read(name) for name in names]

    async def load(self, names: Iterable[str]) -> list[WorkspaceFile]:
        """The files: kept texts still current are used as they are, missing files are markers,
        and the rest are read in a worker thread (a slow disk never stalls the event loop)."""
        names = list(names)
        known = self._unchanged(names)
        if len(known) < len(names):
            fresh = await asyncio.to_thread(self.read_all, [n for n in names if n not in known])
            known.update((f.name, f) for f in fresh)
        return [known[name] for name in names]

    def _unchanged(self, names: list[str]) -> dict[str, WorkspaceFile]:
        """Of the kept files, those whose status is the one read, and names still missing.
        One status call per name (no link followed): a few microseconds, no thread."""
        if not self._kept:
            return {}
        found: dict[str, WorkspaceFile] = {}
        try:
            root = os.open(self.root.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return found
        try:
            for name in names:
                kept = self._kept.get(name)
                if kept is None:
                    continue
                try:
                    info = os.stat(name, dir_fd=root, follow_symlinks=False)
                except FileNotFoundError:
                    if kept[0] is None:
                        found[name] = kept[1]
                    continue
                except OSError:
                    continue  # unreadable: the safe read says why
                if stat.S_ISREG(info.st_mode) and signature(info) == kept[0]:
                    found[name] = kept[1]
        finally:
            os.close(root)
        return found
