"""Upgrading from JSONL sessions (the store before PostgreSQL): each file is imported once.

The files are left where they were, as a backup; `legacy_imports` remembers what was imported, so a
restart (or another replica) never imports a file twice. Acknowledged messages that were still
in the old inbox come back as queued tasks.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

from orchestrator.store.database import Connection, Database
from orchestrator.store.sessions import SESSION_ID, append_records

log = logging.getLogger(__name__)

INBOX = "inbox.jsonl"


async def import_sessions(db: Database, folder: Path) -> int:
    """Imports every not yet imported `<session>.jsonl` in `folder`; returns how many."""
    count = 0
    for path in await asyncio.to_thread(_session_files, folder):
        async with db.transaction() as conn:
            # Checked before reading: a transcript mirror (store/transcripts.py) in this folder
            # is marked as imported and has another format.
            if not await _first_time(conn, f"sessions/{path.name}"):
                continue
            records = await asyncio.to_thread(read_session_file, path)
            if records:
                await append_records(conn, path.stem, records)
            count += 1
    if count:
        log.info("imported %d JSONL session(s) from %s (the files are kept)", count, folder)
    return count


async def pending_inbox(db: Database, data_dir: Path) -> list[dict[str, Any]]:
    """Messages the old inbox acknowledged but never ran, until `inbox_imported` is called:
    the caller queues them (under their task ids, so none is queued twice)."""
    path = data_dir / INBOX
    if not await asyncio.to_thread(path.exists):
        return []
    async with db.connection() as conn:
        cursor = await conn.execute("SELECT 1 FROM legacy_imports WHERE name = %s", (INBOX,))
        if await cursor.fetchone() is not None:
            return []
    entries = []
    for line in (await asyncio.to_thread(path.read_text, encoding="utf-8")).splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue  # a torn last line: that message was never acknowledged
    return [e for e in entries if {"task_id", "session_id", "message"} <= set(e)]


async def inbox_imported(db: Database) -> None:
    async with db.transaction() as conn:
        await _first_time(conn, INBOX)


async def _first_time(conn: Connection, name: str) -> bool:
    cursor = await conn.execute(
        "INSERT INTO legacy_imports (name, imported_at) VALUES (%s, %s)"
        " ON CONFLICT (name) DO NOTHING RETURNING name",
        (name, time.time()),
    )
    return await cursor.fetchone() is not None


def _session_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.jsonl") if SESSION_ID.match(p.stem))


def read_session_file(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The file's whole groups as (kind, body) records; a torn tail is left out."""
    records: list[tuple[str, dict[str, Any]]] = []
    pending: list[dict[str, Any]] = []
    for line in path.read_bytes().splitlines(keepends=True):
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
            for whole in pending:
                if "compaction" in whole:
                    records.append(("compaction", whole["compaction"]))
                else:
                    records.append(("message", whole["message"]))
            pending = []
    return records
