"""Session history: each message group is appended in one transaction, so none is ever split.

A compaction is a record too: the effective history is rebuilt by applying it on load.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Json

from orchestrator.agent.turn_context import without_turn_context
from orchestrator.store.database import Connection, Database, lock_session
from orchestrator.store.transcripts import TranscriptMirror

KEPT_SESSIONS = 64  # histories kept in memory, the most recently read
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
TITLE_CHARS = 80


class InvalidSessionId(ValueError):
    pass


@dataclass
class SessionInfo:
    id: str
    messages: int
    updated_at: float
    title: str


def pg_text(value: str | None) -> str | None:
    """Text as a PostgreSQL text column takes it: NUL (which tool output can hold) becomes U+FFFD.
    JSON columns keep it, escaped."""
    return value.replace("\x00", "\ufffd") if value else value


def check_session_id(session_id: str) -> str:
    if not SESSION_ID.match(session_id):
        raise InvalidSessionId(
            "session_id must be 1-64 characters of letters, digits, '_', '-' or '.'"
        )
    return session_id


@dataclass
class CachedHistory:
    """A session's effective history as of its record `last_seq` (`created_at` tells the
    session from one deleted and made again under its id)."""

    created_at: float
    last_seq: int
    messages: list[dict[str, Any]]


class SessionStore:
    """Sessions and their message records in PostgreSQL."""

    def __init__(self, db: Database, mirror: TranscriptMirror | None = None):
        self.db = db
        self.mirror = mirror or TranscriptMirror(None)
        self._kept: OrderedDict[str, CachedHistory] = OrderedDict()  # the latest read sessions

    async def exists(self, session_id: str) -> bool:
        check_session_id(session_id)
        async with self.db.connection() as conn:
            found = await conn.execute("SELECT 1 FROM sessions WHERE id = %s", (session_id,))
            return await found.fetchone() is not None

    async def append(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Writes messages as one group: all of them or none."""
        if messages:
            records = [("message", m) for m in messages]
            async with self.db.connection() as conn:
                await append_records(
                    conn, session_id, records, imported=self.mirror.import_mark(session_id)
                )
            self.mirror.record(session_id, messages)

    async def append_compaction(self, session_id: str, summary: str, replaced: int) -> None:
        """Records that the first `replaced` messages of the history are now this summary."""
        body = {"summary": summary, "replaced": replaced}
        async with self.db.connection() as conn:
            await append_records(conn, session_id, [("compaction", body)])

    async def load(self, session_id: str) -> list[dict[str, Any]]:
        """The effective history: messages, with compactions applied. A session read lately is
        kept here and only its records since are read (any replica may have appended them);
        the list is new, its messages are shared: callers copy a message they change."""
        check_session_id(session_id)
        kept = self._kept.get(session_id)
        after = kept.last_seq if kept else 0
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT s.created_at, r.seq, r.kind, r.body FROM sessions s"
                " LEFT JOIN session_records r ON r.session_id = s.id AND r.seq > %s"
                " WHERE s.id = %s ORDER BY r.seq",
                (after, session_id),
            )
            rows = await cursor.fetchall()
        if not rows:
            self._kept.pop(session_id, None)
            return []
        records = [row for row in rows if row["seq"] is not None]
        if kept is None or kept.created_at != rows[0]["created_at"]:
            if after:  # deleted and made again since: read it whole
                self._kept.pop(session_id, None)
                return await self.load(session_id)
            kept = CachedHistory(rows[0]["created_at"], 0, [])
        elif self._kept.get(session_id) is not kept or kept.last_seq != after:
            return await self._load_whole(session_id)  # another read moved it meanwhile
        if records:
            kept.messages = effective_history(records, kept.messages)
            kept.last_seq = records[-1]["seq"]
        self._keep(session_id, kept)
        return list(kept.messages)

    async def append_fenced(
        self, fence: Fence, session_id: str, messages: list[dict[str, Any]], load: bool = False
    ) -> list[dict[str, Any]] | None:
        """Appends a message group of a running turn (`fence`) in one statement; None when the
        turn does not run (nothing is written). With `load`, that statement also reads the
        history before the group, which is returned (as `load` would have)."""
        appending = RecordsToAppend(
            session_id, [("message", m) for m in messages], self.mirror.import_mark(session_id)
        )
        params = {**appending.params(), "task": fence.task_id}
        kept = self._kept.get(session_id) if load else None
        params["after"] = kept.last_seq if kept else 0
        if load:
            query = (
                f"WITH {fence.with_clause()}, appended AS ("
                f" SELECT a.seq, a.created_at FROM fence, LATERAL {APPEND} a)"
                " SELECT true AS new, a.created_at, a.seq, NULL::text AS kind, NULL::json AS body"
                " FROM appended a"
                " UNION ALL SELECT false, NULL, r.seq, r.kind, r.body FROM session_records r"
                " WHERE r.session_id = %(id)s AND r.seq > %(after)s"
                " AND EXISTS (SELECT 1 FROM appended) ORDER BY 1, 3"
            )
        else:
            query = f"WITH {fence.with_clause()} SELECT true AS new FROM fence, LATERAL {APPEND} a"
        async with self.db.connection() as conn:
            rows = await (await conn.execute(query, params)).fetchall()
        if not any(row["new"] for row in rows):
            return None
        self.mirror.record(session_id, messages)
        if not load:
            return []
        return await self._kept_after_append(session_id, kept, params["after"], rows, messages)

    async def _kept_after_append(
        self,
        session_id: str,
        kept: CachedHistory | None,
        after: int,
        rows: list[dict[str, Any]],
        messages: list[dict[str, Any]],
    ) -> list[dict[str, Any]]:
        """The history before `messages`, from the records after `after` that `rows` hold;
        the kept history moves on past them."""
        new = [row for row in rows if row["new"]]
        created_at = new[0]["created_at"]
        if kept is None:
            kept = CachedHistory(created_at, 0, [])
        elif (
            kept.created_at != created_at
            or self._kept.get(session_id) is not kept
            or kept.last_seq != after
        ):  # deleted and made again since, or moved by another read: read it whole
            self._kept.pop(session_id, None)
            whole = await self._load_whole(session_id)
            return whole[: len(whole) - len(messages)]
        history = effective_history([row for row in rows if not row["new"]], kept.messages)
        kept.messages = [*history, *messages]
        kept.last_seq = max(row["seq"] for row in new)
        self._keep(session_id, kept)
        return list(history)

    async def _load_whole(self, session_id: str) -> list[dict[str, Any]]:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT kind, body FROM session_records WHERE session_id = %s ORDER BY seq",
                (session_id,),
            )
            return effective_history(await cursor.fetchall())

    def _keep(self, session_id: str, kept: CachedHistory) -> None:
        self._kept[session_id] = kept
        self._kept.move_to_end(session_id)
        while len(self._kept) > KEPT_SESSIONS:
            self._kept.popitem(last=False)

    async def delete(self, session_id: str) -> bool:
        check_session_id(session_id)
        async with self.db.connection() as conn:
            gone = await conn.execute("DELETE FROM sessions WHERE id = %s", (session_id,))
        self._kept.pop(session_id, None)
        self.mirror.delete(session_id)
        return gone.rowcount > 0

    async def list(self) -> list[SessionInfo]:
        """Sessions, most recently updated first."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT id, message_count, updated_at, title FROM sessions ORDER BY updated_at DESC"
            )
            rows = await cursor.fetchall()
        return [SessionInfo(r["id"], r["message_count"], r["updated_at"], r["title"]) for r in rows]

    async def delete_locked(self, session_id: str, before: Callable[[], Awaitable[None]]) -> bool:
        """Deletes the session while holding it, after `before()` has run (raising there keeps
        the session): a turn of the session sent meanwhile waits and then starts afresh."""
        check_session_id(session_id)
        async with self.db.transaction() as conn:
            await lock_session(conn, session_id)
            await before()
            gone = await conn.execute("DELETE FROM sessions WHERE id = %s", (session_id,))
        # Queued at once after the commit (no await between), so ahead of any later turn's lines.
        self._kept.pop(session_id, None)
        self.mirror.delete(session_id)
        return gone.rowcount > 0


def _text_of(content: Any) -> str:
    """A message's text; of a list of parts (text and images), the text parts."""
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict)).strip()
    return str(content or "")


@dataclass(frozen=True)
class Fence:
    """Records appended only while turn `task_id` runs (its row held to the commit); `accept`
    also marks it accepted."""

    task_id: str
    accept: bool = False

    def with_clause(self) -> str:
        if self.accept:
            return (
                "fence AS (UPDATE tasks SET accepted = true"
                " WHERE id = %(task)s AND status = 'running' RETURNING id)"
            )
        return (
            "fence AS (SELECT id FROM tasks WHERE id = %(task)s AND status = 'running' FOR UPDATE)"
        )


@dataclass(frozen=True)
class RecordsToAppend:
    """Records to append, as crayfish_append_records takes them (`imported`: the
    legacy_imports name to mark with them, TranscriptMirror.import_mark)."""

    session_id: str
    records: list[tuple[str, dict[str, Any]]]
    imported: str | None = None

    def params(self) -> dict[str, Any]:
        check_session_id(self.session_id)
        title = next(
            (
                without_turn_context(_text_of(body.get("content")))[:TITLE_CHARS]
                for kind, body in self.records
                if kind == "message" and body.get("role") == "user"
            ),
            "",
        )
        delta = sum(1 for kind, _ in self.records if kind == "message")
        for kind, body in self.records:
            if kind == "compaction":
                delta += 1 - int(body["replaced"])
        return {
            "id": self.session_id,
            "title": pg_text(title),
            "delta": delta,
            "now": time.time(),
            # json[] (binary), not one JSON text: a body is never parsed by the server (a
            # tool's output may hold \u0000, which json accepts and its operators refuse).
            "kinds": [kind for kind, _ in self.records],
            "bodies": [Json(body) for _, body in self.records],
            "imported": self.imported,
        }


APPEND = (
    "crayfish_append_records(%(id)s, %(title)s, %(delta)s, %(now)s, %(kinds)b::text[],"
    " %(bodies)b::json[], %(imported)s)"
)


async def append_records(
    conn: Connection,
    session_id: str,
    records: list[tuple[str, dict[str, Any]]],
    imported: str | None = None,
) -> None:
    """Appends records to a session (made on first use) in one statement, inside the caller's
    transaction if it has one. (A running turn's groups: SessionStore.append_fenced.)"""
    params = RecordsToAppend(session_id, records, imported).params()
    await conn.execute(f"SELECT count(*) AS n FROM {APPEND}", params)


def effective_history(
    records: list[dict[str, Any]], before: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The messages after `records` (with their compactions applied), following `before`."""
    messages: list[dict[str, Any]] = list(before or [])
    for record in records:
        if record["kind"] == "compaction":
            info = record["body"]
            summary = {"role": "user", "content": summary_message(info["summary"])}
            messages = [summary, *messages[int(info["replaced"]) :]]
        else:
            messages.append(record["body"])
    return messages


def summary_message(summary: str) -> str:
    return (
        "[Summary of the earlier conversation, written when it was compacted. The rules of the "
        "system prompt still apply.]\n" + summary.strip()
    )
