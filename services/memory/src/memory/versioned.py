"""Changes to memory's files that become revisions: write, edit, restore, the scan for hand edits.

Authors: `session:<id>` for the model's tools, `api` for REST, `hand` for what a scan finds changed
(a person or a sandboxed command). Before a tool or REST change, what changed by hand in the same
file is recorded first, so a revision never passes off someone else's edit as its author's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from crayfish_common.safe_files import FileRefused, SafeRoot

from memory.history import MemoryHistory, Revision, blob_id
from memory.notes import MAX_NOTE_FILE_BYTES, WriteResult, append_note, today_path
from memory.tracked import Snapshot, read_tracked, scan, tracked_path

log = logging.getLogger(__name__)

HAND = "hand"
HAND_REASON = "changed outside memory's tools (by hand or a command)"
MAX_EDIT_CHARS = 20_000


@dataclass(frozen=True)
class Restored:
    """What a restore did: the revision it made (None when the files already matched)."""

    source: str  # the full id of the revision restored
    revision: Revision | None
    files: list[str] = field(default_factory=list)


class VersionedMemory:
    """Writes through the workspace root, records in the history, re-indexes what changed.

    Not thread-safe on its own: the memory core calls it with the index's lock held, and
    `reindex(paths)` runs under that lock.
    """

    def __init__(
        self, root: SafeRoot, history: MemoryHistory, reindex: Callable[[set[str]], object]
    ) -> None:
        self.root = root
        self.history = history
        self.reindex = reindex

    def record_scan(self, author: str = HAND, reason: str = HAND_REASON) -> Revision | None:
        """Compares every tracked file with the newest revision; a difference becomes one."""
        try:
            snapshot = scan(self.root)
        except FileNotFoundError as exc:
            log.warning("history not recorded: %s", exc)
            return None
        changes: dict[str, bytes | None] = {}
        known = self.history.entries()
        for path, data in snapshot.files.items():
            if known.get(path) != blob_id(data):
                changes[path] = data
        for path in set(known) - set(snapshot.files):
            if not _unreadable(path, snapshot):
                changes[path] = None
        for refusal in snapshot.refused.values():
            log.warning("history keeps the last readable version: %s", refusal)
        if self.history.head() is None:
            reason = "history started: the files as found"
        return self.history.commit(changes, author, reason) if changes else None

    def _record_hand(self, rel: str) -> None:
        """What changed by hand in `rel` since its last revision becomes a `hand` revision."""
        try:
            data = read_tracked(self.root, rel)
        except FileRefused:
            return
        if self.history.entries().get(rel) != (blob_id(data) if data is not None else None):
            self.history.commit({rel: data}, HAND, HAND_REASON)

    def write(
        self, text: str, path: str, author: str, reason: str
    ) -> tuple[WriteResult, Revision | None]:
        """Appends a note (default: today's memory/YYYY-MM-DD.md) as a revision by `author`."""
        rel = tracked_path(path) if path else today_path()
        self._record_hand(rel)
        start, end = append_note(self.root, rel, text, PurePosixPath(rel).stem)
        revision = self._commit(rel, author, reason or f"memory_write to {rel}")
        return WriteResult(rel, start, end), revision

    def edit(
        self, path: str, old_text: str, new_text: str, author: str, reason: str
    ) -> Revision | None:
        """Replaces the one occurrence of `old_text` in a tracked file, as a revision."""
        rel = tracked_path(path)
        if not old_text:
            raise ValueError("old_text is empty: copy the exact text to replace (memory_get)")
        if len(old_text) > MAX_EDIT_CHARS or len(new_text) > MAX_EDIT_CHARS:
            raise ValueError(f"an edit replaces at most {MAX_EDIT_CHARS} characters with as many")
        if not reason.strip():
            raise ValueError("reason is empty: say why (e.g. which session it came from)")
        self._record_hand(rel)
        data = read_tracked(self.root, rel)
        if data is None:
            raise FileNotFoundError(f"{rel} does not exist; create it with memory_write")
        text = data.decode("utf-8", errors="replace")
        count = text.count(old_text)
        if count != 1:
            raise ValueError(_not_once(rel, count))
        edited = text.replace(old_text, new_text, 1).encode()
        self.root.write_atomic(rel, edited, MAX_NOTE_FILE_BYTES)
        return self._commit(rel, author, reason)

    def restore(self, rev: str, author: str, reason: str, path: str = "") -> Restored:
        """Makes the tracked files (or one) what they were at `rev`, as a new revision."""
        only = tracked_path(path) if path else None
        self.record_scan()
        full, wanted = self.history.files_at(rev)
        now = scan(self.root)
        changed: dict[str, bytes | None] = {}
        paths = set(wanted) | set(now.files) if only is None else {only}
        try:
            for path in sorted(paths):
                target = wanted.get(path)
                if now.files.get(path) == target:
                    continue  # unchanged, or absent in both (a planted link is not ours to remove)
                self._put(path, target)
                changed[path] = target
        finally:
            # Even a restore stopped half-way by a refused file records what it did change.
            note = reason or f"restore {only or 'the files'} as at {full[:12]}"
            revision = self.history.commit(changed, author, note) if changed else None
            self.reindex(set(changed))
        return Restored(full, revision, sorted(changed))

    def _put(self, rel: str, data: bytes | None) -> None:
        """Writes or deletes a file; a link or FIFO in the way is itself removed, never followed."""
        if data is None:
            self.root.remove(rel)
            return
        try:
            self.root.write_atomic(rel, data, MAX_NOTE_FILE_BYTES)
        except FileRefused as exc:
            if exc.kind != "not_regular":
                raise
            self.root.remove(rel)
            self.root.write_atomic(rel, data, MAX_NOTE_FILE_BYTES)

    def _commit(self, rel: str, author: str, reason: str) -> Revision | None:
        data = read_tracked(self.root, rel)
        revision = self.history.commit({rel: data}, author, reason)
        self.reindex({rel})
        return revision


def _unreadable(path: str, snapshot: Snapshot) -> bool:
    """Present but refused (itself or a folder above it): not a deletion."""
    return any(path == bad or path.startswith(bad.rstrip("/") + "/") for bad in snapshot.refused)


def _not_once(rel: str, count: int) -> str:
    if count == 0:
        return f"old_text was not found in {rel}; read it with memory_get and copy the exact text"
    return f"old_text occurs {count} times in {rel}; include more of the text around it"
