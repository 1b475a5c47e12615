"""Session history as JSONL, one fsynced write per message group, so a crash never splits one."""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class InvalidSessionId(ValueError):
    pass


@dataclass
class SessionInfo:
    id: str
    messages: int
    updated_at: float
    title: str


class SessionStore:
    """Append-only JSONL per session; each line carries its group id and the group's size."""

    def __init__(self, root: Path):
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._next_group = int(time.time() * 1000)

    def path(self, session_id: str) -> Path:
        if not SESSION_ID.match(session_id):
            raise InvalidSessionId(
                "session_id must be 1-64 characters of letters, digits, '_', '-' or '.'"
            )
        return self.root / f"{session_id}.jsonl"

    def exists(self, session_id: str) -> bool:
        return self.path(session_id).exists()

    def append(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Writes messages as one group with a single write + fsync."""
        if not messages:
            return
        with self._lock:
            self._next_group += 1
            group = self._next_group
        now = time.time()
        lines = [
            json.dumps(
                {"g": group, "n": len(messages), "ts": now, "message": m}, ensure_ascii=False
            )
            for m in messages
        ]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        fd = os.open(self.path(session_id), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def append_compaction(self, session_id: str, summary: str, replaced: int) -> None:
        """Records that the first `replaced` messages of the history are now this summary."""
        with self._lock:
            self._next_group += 1
            group = self._next_group
        record = {"g": group, "n": 1, "ts": time.time(), "compaction": {"summary": summary}}
        record["compaction"]["replaced"] = replaced
        fd = os.open(self.path(session_id), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)

    def load(self, session_id: str) -> list[dict[str, Any]]:
        """The effective history: complete groups, with compactions applied.

        A torn tail (a crash mid-write) is cut off the file and logged.
        """
        path = self.path(session_id)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return []
        records, good_bytes = _complete_records(raw)
        if good_bytes < len(raw):
            log.warning("session %s: dropping %d torn bytes", session_id, len(raw) - good_bytes)
            with path.open("r+b") as handle:
                handle.truncate(good_bytes)
        messages: list[dict[str, Any]] = []
        for record in records:
            if "compaction" in record:
                info = record["compaction"]
                summary = {"role": "user", "content": summary_message(info["summary"])}
                messages = [summary, *messages[int(info["replaced"]) :]]
            else:
                messages.append(record["message"])
        return messages

    def delete(self, session_id: str) -> bool:
        try:
            self.path(session_id).unlink()
        except FileNotFoundError:
            return False
        return True

    def list(self) -> list[SessionInfo]:
        infos = []
        for path in self.root.glob("*.jsonl"):
            messages = self.load(path.stem)
            title = next(
                (str(m.get("content", ""))[:80] for m in messages if m.get("role") == "user"),
                "",
            )
            infos.append(SessionInfo(path.stem, len(messages), path.stat().st_mtime, title))
        return sorted(infos, key=lambda s: s.updated_at, reverse=True)


def summary_message(summary: str) -> str:
    return (
        "[Summary of the earlier conversation, written when it was compacted. The rules of the "
        "system prompt still apply.]\n" + summary.strip()
    )


def _complete_records(raw: bytes) -> tuple[list[dict[str, Any]], int]:
    """Records of whole groups, and how many leading bytes hold them."""
    records: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    good = offset = 0
    for line in raw.splitlines(keepends=True):
        offset += len(line)
        if not line.endswith(b"\n"):
            break
        try:
            record = json.loads(line)
        except ValueError:
            break
        if pending and record.get("g") != pending[0].get("g"):
            break  # the previous group never finished
        pending.append(record)
        if len(pending) >= int(record.get("n", 1)):
            records += pending
            pending = []
            good = offset
    return records, good


class Inbox:
    """Acknowledged messages not yet taken into a run, so a crash loses none of them."""

    def __init__(self, root: Path):
        self.path = root / "inbox.jsonl"
        root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def add(self, task_id: str, session_id: str, message: str, kind: str) -> None:
        line = json.dumps(
            {"task_id": task_id, "session_id": session_id, "message": message, "kind": kind},
            ensure_ascii=False,
        )
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def remove(self, task_id: str) -> None:
        with self._lock:
            kept = [e for e in self._read() if e.get("task_id") != task_id]
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in kept))
            os.replace(tmp, self.path)

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            return self._read()

    def _read(self) -> list[dict[str, Any]]:
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        entries = []
        for line in lines:
            try:
                entries.append(json.loads(line))
            except ValueError:
                continue  # a torn last line: that message was never acknowledged
        return entries
