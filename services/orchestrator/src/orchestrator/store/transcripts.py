"""An optional JSONL mirror of session transcripts, for the memory service to index.

PostgreSQL stays the store of record; nothing ever reads these files back. After a message group
is committed, its user and assistant messages with text are appended as `{"role", "content"}`
lines to `<folder>/<session id>.jsonl` by one worker thread (in the order committed), so a turn
never waits for the disk and never fails because of it: a failed write is logged once per
session. Deleting a session deletes its file.
"""

from __future__ import annotations

import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from orchestrator.agent.turn_context import content_without_turn_context

log = logging.getLogger(__name__)


class TranscriptMirror:
    """Off when `folder` is None."""

    def __init__(self, folder: Path | None):
        self.folder = folder
        self._writer: ThreadPoolExecutor | None = None
        self._claimed: set[str] = set()  # sessions known to be marked in legacy_imports
        self._failed: set[str] = set()  # touched by the writer thread only

    @property
    def enabled(self) -> bool:
        return self.folder is not None

    def import_mark(self, session_id: str) -> str | None:
        """The legacy_imports name to mark in the statement that appends to the session (None
        when marked already, or the mirror is off), so a start-up never takes the mirror for a
        JSONL session from before PostgreSQL (the mirror may be the old sessions folder)."""
        if self.folder is None or session_id in self._claimed:
            return None
        return f"sessions/{session_id}.jsonl"

    def record(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """After the commit: queues the user/assistant text of the group; returns at once."""
        if self.folder is None:
            return
        self._claimed.add(session_id)
        lines = [
            json.dumps({"role": m["role"], "content": _as_written(m)}, ensure_ascii=False) + "\n"
            for m in messages
            if m.get("role") in ("user", "assistant") and _has_text(m.get("content"))
        ]
        if lines:
            self._submit(self._append, session_id, "".join(lines))

    def delete(self, session_id: str) -> None:
        """After the session's rows are gone: removes its file (queued after earlier writes)."""
        if self.folder is not None:
            self._submit(self._remove, session_id)

    def close(self) -> None:
        """Waits for the queued writes."""
        if self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None

    def _submit(self, job: Any, session_id: str, *args: str) -> None:
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="transcripts")
        self._writer.submit(job, session_id, *args)

    def _path(self, session_id: str) -> Path:
        assert self.folder is not None
        return self.folder / f"{session_id}.jsonl"

    def _append(self, session_id: str, text: str) -> None:
        try:
            assert self.folder is not None
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(self._path(session_id), flags, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as file:
                file.write(text)
        except Exception as exc:  # the mirror must never fail a turn
            if session_id not in self._failed:
                self._failed.add(session_id)
                log.warning(
                    "transcript mirror: cannot write %s (%s); later failures of this session are "
                    "not logged",
                    self._path(session_id),
                    exc,
                )

    def _remove(self, session_id: str) -> None:
        self._failed.discard(session_id)
        try:
            self._path(session_id).unlink(missing_ok=True)
        except Exception as exc:
            log.warning("transcript mirror: cannot delete %s (%s)", self._path(session_id), exc)


def _has_text(content: object) -> bool:
    if isinstance(content, str):
        return bool(content.strip())
    return isinstance(content, list) and bool(content)


def _as_written(message: dict[str, Any]) -> Any:
    """The user's own words: the turn context (time, recalled memory) is not indexed again."""
    content = message["content"]
    if message.get("role") == "user":
        return content_without_turn_context(content)
    return content
