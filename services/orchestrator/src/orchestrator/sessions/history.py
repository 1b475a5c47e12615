"""Session history as JSONL, one fsynced write per message group, so a crash never splits one.

Plain files rather than SQLite: append-only, readable by a person, one file per session.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.sessions.files import FileWorker, append_whole, fsync_folder

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
        self._worker = FileWorker("session-store")
        self._next_group = int(time.time() * 1000)

    def path(self, session_id: str) -> Path:
        if not SESSION_ID.match(session_id):
            raise InvalidSessionId(
                "session_id must be 1-64 characters of letters, digits, '_', '-' or '.'"
            )
        return self.root / f"{session_id}.jsonl"

    async def exists(self, session_id: str) -> bool:
        return await self._worker.run(self.path(session_id).exists)

    async def append(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Writes messages as one group with a single write + fsync."""
        if messages:
            await self._write(session_id, [{"message": m} for m in messages])

    async def append_compaction(self, session_id: str, summary: str, replaced: int) -> None:
        """Records that the first `replaced` messages of the history are now this summary."""
        await self._write(session_id, [{"compaction": {"summary": summary, "replaced": replaced}}])

    async def load(self, session_id: str) -> list[dict[str, Any]]:
        """The effective history: complete groups, with compactions applied.

        A torn tail (a crash mid-write) is cut off the file and logged.
        """
        return await self._worker.run(self._load, self.path(session_id))

    async def delete(self, session_id: str) -> bool:
        return await self._worker.run(self._delete, self.path(session_id))

    async def _write(self, session_id: str, bodies: list[dict[str, Any]]) -> None:
        path = self.path(session_id)
        self._next_group += 1
        head = {"g": self._next_group, "n": len(bodies), "ts": time.time()}
        # Encoded here, before the caller can change a message while the worker writes it.
        lines = [json.dumps({**head, **body}, ensure_ascii=False) + "\n" for body in bodies]
        await self._worker.run(self._append, path, "".join(lines).encode("utf-8"))

    # Below: blocking work, run only on the worker thread.

    def _append(self, path: Path, data: bytes) -> None:
        append_whole(path, data)

    def _load(self, path: Path) -> list[dict[str, Any]]:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return []
        records, good_bytes = _complete_records(raw)
        if good_bytes < len(raw):
            log.warning("session %s: dropping %d torn bytes", path.stem, len(raw) - good_bytes)
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

    def _delete(self, path: Path) -> bool:
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        fsync_folder(path.parent)
        return True

    def _list(self) -> list[SessionInfo]:
        infos = []
        for path in self.root.glob("*.jsonl"):
            messages = self._load(path)
            title = next(
                (str(m.get("content", ""))[:80] for m in messages if m.get("role") == "user"),
                "",
            )
            infos.append(SessionInfo(path.stem, len(messages), path.stat().st_mtime, title))
        return sorted(infos, key=lambda s: s.updated_at, reverse=True)

    async def close(self) -> None:
        await self._worker.close()

    # Last, so that `list` in the annotations above is still the builtin.
    async def list(self) -> list[SessionInfo]:
        """Sessions, most recently updated first."""
        return await self._worker.run(self._list)


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
