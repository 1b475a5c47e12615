"""Session summaries (table `session_summaries`) and the memory consolidation runs that read them
(`memory_consolidations`): the SQL behind consolidation/."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.store.database import Database
from orchestrator.store.sessions import effective_history, pg_text


@dataclass(frozen=True)
class StoredSummary:
    """A session's summary: it stands for the first `messages` messages of the effective
    history, those of the records up to `through_seq`."""

    session_id: str
    summary: str
    through_seq: int
    messages: int
    made_at: float
    title: str = ""
    updated_at: float = 0.0


@dataclass(frozen=True)
class SessionHistory:
    """A session's effective history as of record `last_seq`, and its summary if any
    (`prefix_kept`: no compaction since, so the summary still stands for a prefix)."""

    messages: list[dict[str, Any]]
    last_seq: int
    summary: StoredSummary | None
    prefix_kept: bool


SUMMARY_COLUMNS = "m.session_id, m.summary, m.through_seq, m.messages, m.made_at"


class SummaryStore:
    """Summaries kept with their sessions, and the runs of consolidation."""

    def __init__(self, db: Database):
        self.db = db

    async def stale(self, idle_before: float, skip: Sequence[str], limit: int) -> list[str]:
        """Sessions with records their summary lacks, last written before `idle_before`, with
        no turn queued or running; the longest idle first."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT s.id FROM sessions s"
                " LEFT JOIN session_summaries m ON m.session_id = s.id"
                " WHERE s.updated_at < %(before)s AND s.id <> ALL(%(skip)s)"
                " AND (m.session_id IS NULL OR m.through_seq < (SELECT max(r.seq)"
                "  FROM session_records r WHERE r.session_id = s.id))"
                " AND EXISTS (SELECT 1 FROM session_records r WHERE r.session_id = s.id)"
                " AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.session_id = s.id"
                "  AND t.status IN ('queued', 'running'))"
                " ORDER BY s.updated_at LIMIT %(limit)s",
                {"before": idle_before, "skip": list(skip), "limit": limit},
            )
            return [str(row["id"]) for row in await cursor.fetchall()]

    async def history(self, session_id: str) -> SessionHistory | None:
        """The session's effective history and its summary, read in one transaction."""
        async with self.db.transaction() as conn:
            cursor = await conn.execute(
                "SELECT seq, kind, body FROM session_records WHERE session_id = %s ORDER BY seq",
                (session_id,),
            )
            records = await cursor.fetchall()
            summary = await _summary(conn, session_id)
        if not records:
            return None
        last_seq = int(records[-1]["seq"])
        kept = summary is not None and not any(
            r["kind"] == "compaction" and r["seq"] > summary.through_seq for r in records
        )
        return SessionHistory(effective_history(records), last_seq, summary, kept)

    async def put(self, summary: StoredSummary) -> bool:
        """Stores the summary unless one covering as many records is there (another replica's)
        or the session is gone; True when stored."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "INSERT INTO session_summaries (session_id, summary, through_seq, messages,"
                " made_at) SELECT %(id)s, %(summary)s, %(seq)s, %(messages)s, %(now)s"
                " WHERE EXISTS (SELECT 1 FROM sessions WHERE id = %(id)s)"
                " ON CONFLICT (session_id) DO UPDATE SET summary = EXCLUDED.summary,"
                " through_seq = EXCLUDED.through_seq, messages = EXCLUDED.messages,"
                " made_at = EXCLUDED.made_at"
                " WHERE session_summaries.through_seq < EXCLUDED.through_seq RETURNING 1",
                {
                    "id": summary.session_id,
                    "summary": pg_text(summary.summary),
                    "seq": summary.through_seq,
                    "messages": summary.messages,
                    "now": summary.made_at,
                },
            )
            return await cursor.fetchone() is not None

    async def reusable(self, session_id: str, history_length: int) -> StoredSummary | None:
        """The session's summary if it still stands for a prefix of the history and the
        history of `history_length` messages (the incoming one aside) is the whole of it."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {SUMMARY_COLUMNS} FROM session_summaries m"
                " JOIN sessions s ON s.id = m.session_id"
                " WHERE m.session_id = %(id)s AND s.message_count = %(length)s + 1"
                " AND NOT EXISTS (SELECT 1 FROM session_records r WHERE r.session_id = %(id)s"
                "  AND r.kind = 'compaction' AND r.seq > m.through_seq)",
                {"id": session_id, "length": history_length},
            )
            row = await cursor.fetchone()
        return _stored(row) if row else None

    async def made_after(
        self, since: float, skip: Sequence[str], limit: int
    ) -> list[StoredSummary]:
        """Summaries made after `since`, oldest first, at most `limit`."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {SUMMARY_COLUMNS}, s.title, s.updated_at FROM session_summaries m"
                " JOIN sessions s ON s.id = m.session_id"
                " WHERE m.made_at > %s AND m.session_id <> ALL(%s)"
                " ORDER BY m.made_at, m.session_id LIMIT %s",
                (since, list(skip), limit),
            )
            return [_stored(row) for row in await cursor.fetchall()]

    async def news_since(self, since: float, skip: Sequence[str]) -> bool:
        """Whether a summary was made after `since`, or a session no turn is using has
        records its summary lacks (the sessions in `skip` aside)."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT EXISTS (SELECT 1 FROM session_summaries"
                " WHERE made_at > %(since)s AND session_id <> ALL(%(skip)s)) AS made",
                {"since": since, "skip": list(skip)},
            )
            row = await cursor.fetchone()
        if row is not None and row["made"]:
            return True
        return bool(await self.stale(float("inf"), skip, 1))

    async def consolidated_until(self) -> float:
        """The time up to which the last completed consolidation read summaries (0: none)."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT coalesce(max(c.until), 0) AS until FROM memory_consolidations c"
                " JOIN tasks t ON t.id = c.task_id WHERE t.status = 'completed'"
            )
            row = await cursor.fetchone()
        return float(row["until"]) if row else 0.0

    async def ended_runs(self) -> int:
        """Consolidation runs whose turn has ended, however it ended."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT count(*) AS n FROM memory_consolidations c JOIN tasks t ON t.id = c.task_id"
                " WHERE t.status NOT IN ('queued', 'running')"
            )
            row = await cursor.fetchone()
        return int(row["n"]) if row else 0

    async def record_run(self, task_id: str, since: float, now: float) -> None:
        """Records a run before its turn is queued (replicas racing with one id: one row)."""
        async with self.db.connection() as conn:
            await conn.execute(
                "INSERT INTO memory_consolidations (task_id, since, created_at)"
                " VALUES (%s, %s, %s) ON CONFLICT (task_id) DO NOTHING",
                (task_id, since, now),
            )

    async def read_until(self, task_id: str, until: float, summaries: int) -> None:
        """Records what the run read: the summaries made up to `until`."""
        async with self.db.connection() as conn:
            await conn.execute(
                "UPDATE memory_consolidations SET until = %s, summaries = %s WHERE task_id = %s",
                (until, summaries, task_id),
            )


async def _summary(conn: Any, session_id: str) -> StoredSummary | None:
    cursor = await conn.execute(
        f"SELECT {SUMMARY_COLUMNS} FROM session_summaries m WHERE m.session_id = %s",
        (session_id,),
    )
    row = await cursor.fetchone()
    return _stored(row) if row else None


def _stored(row: dict[str, Any]) -> StoredSummary:
    return StoredSummary(
        session_id=str(row["session_id"]),
        summary=str(row["summary"]),
        through_seq=int(row["through_seq"]),
        messages=int(row["messages"]),
        made_at=float(row["made_at"]),
        title=str(row.get("title") or ""),
        updated_at=float(row.get("updated_at") or 0.0),
    )
