"""Turns in PostgreSQL (rows of the `tasks` table): created, claimed, read. The table is also
the line turns wait in (0006_turn_line.sql): a session's turns run one at a time, in the order
they were created, on whichever replica claims them. A running turn's writes and outcome:
store/turn_writes.py; its runner's liveness marks: store/runners.py."""

from __future__ import annotations

import time
from typing import Any

from psycopg.types.json import Json

from orchestrator.store.database import Database
from orchestrator.store.events import CHANNEL, QUEUED, EventStore
from orchestrator.store.runners import RunnerRows
from orchestrator.store.sessions import SessionStore, pg_text
from orchestrator.store.spread import ALONE, CLAIM_SHARE, IDLEST_HERE, LOADS, Spread
from orchestrator.store.transcripts import TranscriptMirror
from orchestrator.store.turn_rows import (
    COLUMNS,
    TERMINAL_STATUSES,
    PendingEvents,
    Turn,
    TurnInterrupted,
    TurnStatus,
    as_turn,
)
from orchestrator.store.turn_writes import TurnWrites

__all__ = [
    "TERMINAL_STATUSES",
    "PendingEvents",
    "Turn",
    "TurnInterrupted",
    "TurnStatus",
    "TurnStore",
    "submit_params",
    "submitted",
]


class TurnStore(TurnWrites, RunnerRows):
    """Turn rows and the transitions a turn goes through, each in one statement."""

    def __init__(
        self,
        db: Database,
        events: EventStore,
        mirror: TranscriptMirror | None = None,
        sessions: SessionStore | None = None,
    ):
        self.db = db
        self.events = events
        self.mirror = mirror or TranscriptMirror(None)
        # The session store whose kept histories a turn's appends move on.
        self.sessions = sessions or SessionStore(db, self.mirror)

    async def submit(self, turn: Turn, runner: str | None) -> bool:
        """Records the turn and its `task.queued` event together, durably: once this returns the
        message is acknowledged. With `runner`, a turn whose session has nothing else queued or
        running starts at once on it (`turn.status` says). A turn id that exists already is
        left as it is: False."""
        now = time.time()
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT created, status FROM crayfish_submit(%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                submit_params(turn, runner, now),
            )
            row = await cursor.fetchone()
        assert row is not None
        return submitted(turn, row, now)

    async def claim(
        self, runner: str, limit: int, spread: Spread = ALONE
    ) -> list[tuple[Turn, int]]:
        """Starts up to `limit` tasks on `runner`, fewer when other replicas run fewer turns
        (`spread`): the heads of their sessions' lines, of sessions that run nothing; each with
        the seq of its last event (its `task.started`)."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"WITH {LOADS}, {CLAIM_SHARE} SELECT share.n AS share, c.* FROM share"
                " LEFT JOIN LATERAL crayfish_claim(%(me)s, share.n, %(now)s) AS c ON true",
                {**spread.params(runner), "free": limit, "now": time.time()},
            )
            rows = await cursor.fetchall()
            share = int(rows[0]["share"]) if rows else 0
            names = [name.strip() for name in COLUMNS.split(",")]
            claimed = [as_turn({k: row[k] for k in names}) for row in rows if row["id"] is not None]
            if 0 < share == len(claimed) < limit:
                # More may wait: every claimer weighs the replicas again (one that deferred to
                # a claim it could not see yet included), this one too.
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, QUEUED))
        if not claimed:
            return []
        seqs = await self.events.last_seqs([turn.id for turn in claimed])
        return [(turn, seqs[turn.id]) for turn in claimed]

    async def starts_here(self, runner: str, spread: Spread) -> tuple[bool, int]:
        """Whether a turn this replica accepts should start here (no other live replica with
        room runs fewer turns: store/spread.py), and how many other live replicas there are."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"WITH {LOADS} SELECT {IDLEST_HERE} AS here,"
                " (SELECT count(*) FROM loads) AS others",
                spread.params(runner),
            )
            row = await cursor.fetchone()
        assert row is not None
        return bool(row["here"]), int(row["others"])

    async def get(self, task_id: str) -> Turn | None:
        async with self.db.connection() as conn:
            cursor = await conn.execute(f"SELECT {COLUMNS} FROM tasks WHERE id = %s", (task_id,))
            row = await cursor.fetchone()
        return as_turn(row) if row else None

    async def active(self, session_id: str | None = None, kind: str | None = None) -> list[Turn]:
        """Queued or running tasks, oldest first (of one session or kind when given)."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {COLUMNS} FROM tasks WHERE status IN ('queued', 'running')"
                " AND (%(s)s::text IS NULL OR session_id = %(s)s)"
                " AND (%(k)s::text IS NULL OR kind = %(k)s) ORDER BY line",
                {"s": session_id, "k": kind},
            )
            return [as_turn(row) for row in await cursor.fetchall()]

    async def count_active(self) -> int:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT count(*) AS n FROM tasks WHERE status IN ('queued', 'running')"
            )
            row = await cursor.fetchone()
            return int(row["n"]) if row else 0


def submit_params(turn: Turn, runner: str | None, now: float) -> tuple[Any, ...]:
    """crayfish_submit's arguments for a turn."""
    return (
        turn.id,
        turn.session_id,
        turn.kind,
        pg_text(turn.message),
        turn.created_at,
        Json(turn.images),
        runner,
        now,
        Json(turn.trace) if turn.trace else None,
    )


def submitted(turn: Turn, row: dict[str, Any], now: float) -> bool:
    """Takes in what crayfish_submit said of a turn; whether it created it."""
    if row["created"]:
        turn.status = row["status"]
        turn.started_at = now if turn.status == "running" else None
    return bool(row["created"])
