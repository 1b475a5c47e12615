"""Session history as JSONL, one fsynced write per message group, so a crash never splits one."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger(__name__)

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
T = TypeVar("T")


class InvalidSessionId(ValueError):
    pass


@dataclass
class SessionInfo:
    id: str
    messages: int
    updated_at: float
    title: str


class FileWorker:
    """One thread that does a store's blocking file work, in the order it was asked for.

    So the event loop never waits on a disk, two writes never reorder, a read never sees half a
    write, and a caller cancelled while its write runs cannot let the next one start early.
    """

    def __init__(self, name: str):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        # The job is queued before the first await: call order is execution order.
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def close(self) -> None:
        """Finishes the queued work, then ends the thread."""
        await asyncio.to_thread(self._pool.shutdown, True)


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


def append_whole(path: Path, data: bytes) -> None:
    """Appends data and fsyncs it, or raises with the file as it was: a full disk can cut a
    write short, and a torn line would swallow the next append's first line."""
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, size)
            if created:
                path.unlink()
            raise
    finally:
        os.close(fd)
    if created:
        fsync_folder(path.parent)


def fsync_folder(folder: Path) -> None:
    """Makes a file's creation, rename or removal in `folder` survive a power loss."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
        self._worker = FileWorker("inbox")

    async def add(self, task_id: str, session_id: str, message: str, kind: str) -> None:
        entry = {"task_id": task_id, "session_id": session_id, "message": message, "kind": kind}
        await self._worker.run(self._add, json.dumps(entry, ensure_ascii=False) + "\n")

    async def remove(self, task_id: str) -> None:
        await self._worker.run(self._remove, task_id)

    async def pending(self) -> list[dict[str, Any]]:
        return await self._worker.run(self._read)

    async def close(self) -> None:
        await self._worker.close()

    def _add(self, line: str) -> None:
        append_whole(self.path, line.encode("utf-8"))

    def _remove(self, task_id: str) -> None:
        """Rewrites the inbox without the entry: a new file, fsynced, renamed over the old one."""
        kept = [e for e in self._read() if e.get("task_id") != task_id]
        tmp = self.path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            handle.write("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in kept))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)
        fsync_folder(self.path.parent)

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
