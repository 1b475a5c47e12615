"""The inbox: messages acknowledged to the client but not yet taken into a run."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from orchestrator.sessions.files import FileWorker, append_whole, fsync_folder


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

    # Below: blocking work, run only on the worker thread.

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
