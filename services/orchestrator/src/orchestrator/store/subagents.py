"""Subagent rows in PostgreSQL (0015_subagents.sql): a child spawned under the limits in one
transaction with its turn, the children of a parent, and each child's end told to its parent
once (a waiting call claims it, or a report turn queued in the same statement that claims it)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Jsonb

from orchestrator.store.database import Database
from orchestrator.store.locks import SUBAGENT_LIMIT_LOCK
from orchestrator.store.turn_rows import COLUMNS, TERMINAL_STATUSES, Turn, as_turn
from orchestrator.store.turns import submit_params, submitted

KIND = "subagent"  # the kind of a child's turn
REPORT_KIND = "subagent_report"  # the kind of the parent's turn that reads a child's end
ACTIVE = "('queued', 'running')"
TERMINAL = "(" + ", ".join(f"'{s}'" for s in TERMINAL_STATUSES) + ")"
TURN_NAMES = [c.strip() for c in COLUMNS.split(",")]
TURN_ROW = ", ".join(f"t.{c} AS t_{c}" for c in TURN_NAMES)  # beside ROW: no name twice
ROW = (
    "s.child_id, s.parent_id, s.parent_session, s.child_session, s.sandbox_session, s.label,"
    " s.depth, s.timeout_s, s.created_at, s.waited, s.reported_at"
)


@dataclass
class Child:
    """A subagent: its row, and its turn as it is (None until read with it)."""

    child_id: str
    parent_id: str
    parent_session: str
    child_session: str
    sandbox_session: str
    label: str
    depth: int
    timeout_s: float
    created_at: float
    waited: bool = False
    reported_at: float | None = None
    turn: Turn | None = None

    @property
    def status(self) -> str:
        return self.turn.status if self.turn is not None else "queued"


@dataclass(frozen=True)
class SpawnLimits:
    per_parent: int  # children one parent turn may spawn
    running: int  # children queued or running at once, the whole workspace


class SpawnRefused(Exception):
    """A limit stops the spawn; the message says which, for the model."""


def _child(row: dict[str, Any]) -> Child:
    names = [n.strip().removeprefix("s.") for n in ROW.split(",")]
    child = Child(**{n: row[n] for n in names})
    if row.get("t_id") is not None:
        child.turn = as_turn({n: row[f"t_{n}"] for n in TURN_NAMES})
    return child


class SubagentStore:
    """The subagents table, with the child turns it ties to their parents."""

    def __init__(self, db: Database):
        self.db = db

    async def spawn(self, child: Child, task: str, limits: SpawnLimits) -> None:
        """Records the child and queues its turn (any replica claims it), or SpawnRefused:
        the limits are counted under one lock, so replicas spawning together cannot pass them."""
        now = time.time()
        turn = Turn(child.child_id, child.child_session, task, KIND, created_at=now)
        async with self.db.transaction() as conn:
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SUBAGENT_LIMIT_LOCK,))
            cursor = await conn.execute(
                "SELECT count(*) FILTER (WHERE s.parent_id = %(p)s) AS mine,"
                f" count(*) FILTER (WHERE t.status IS NULL OR t.status IN {ACTIVE}) AS running"
                " FROM subagents s LEFT JOIN tasks t ON t.id = s.child_id"
                " WHERE s.parent_id = %(p)s OR s.reported_at IS NULL",
                {"p": child.parent_id},
            )
            counts = await cursor.fetchone()
            assert counts is not None
            if counts["mine"] >= limits.per_parent:
                raise SpawnRefused(
                    f"this turn has spawned {counts['mine']} subagents, the limit per parent "
                    f"is {limits.per_parent}; use their results or do the work yourself"
                )
            if counts["running"] >= limits.running:
                raise SpawnRefused(
                    f"{counts['running']} subagents are running, the limit is {limits.running}"
                    "; wait for one to end (their results come as messages) and spawn again"
                )
            await conn.execute(
                "INSERT INTO subagents (child_id, parent_id, parent_session, child_session,"
                " sandbox_session, label, depth, timeout_s, created_at, waited)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    child.child_id,
                    child.parent_id,
                    child.parent_session,
                    child.child_session,
                    child.sandbox_session,
                    child.label,
                    child.depth,
                    child.timeout_s,
                    now,
                    child.waited,
                ),
            )
            await _submit(conn, turn, now)

    async def get(self, child_id: str) -> Child | None:
        found = await self._select("s.child_id = %(v)s", child_id)
        return found[0] if found else None

    async def of_parent(self, parent_id: str) -> list[Child]:
        """The children a turn spawned, oldest first."""
        return await self._select("s.parent_id = %(v)s", parent_id)

    async def of_session(self, parent_session: str, active_only: bool = False) -> list[Child]:
        """The children the session's turns spawned, oldest first."""
        where = "s.parent_session = %(v)s"
        if active_only:
            where += f" AND (t.status IS NULL OR t.status IN {ACTIVE})"
        return await self._select(where, parent_session)

    async def of_child_sessions(self, sessions: list[str]) -> dict[str, Child]:
        """The children whose own sessions these are, by session id."""
        found = await self._select("s.child_session = ANY(%(v)s)", sessions)
        return {child.child_session: child for child in found}

    async def _select(self, where: str, value: str | list[str]) -> list[Child]:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {ROW}, {TURN_ROW} FROM subagents s"
                f" LEFT JOIN tasks t ON t.id = s.child_id WHERE {where}"
                " ORDER BY s.created_at, s.child_id",
                {"v": value},
            )
            return [_child(row) for row in await cursor.fetchall()]

    async def set_waited(self, child_id: str, waited: bool) -> None:
        async with self.db.connection() as conn:
            await conn.execute(
                "UPDATE subagents SET waited = %s WHERE child_id = %s", (waited, child_id)
            )

    async def claim_report(self, child_id: str) -> bool:
        """Marks the child's end as told to its parent (by a tool call); False when it was."""
        async with self.db.connection() as conn:
            done = await conn.execute(
                "UPDATE subagents SET reported_at = %s WHERE child_id = %s AND reported_at IS NULL",
                (time.time(), child_id),
            )
            return done.rowcount > 0

    async def report_due(self, message_of: Any) -> list[Turn]:
        """Claims every ended child whose end no one told its parent yet (a waiting call
        holds it unless its parent turn ended) and queues, in the same transaction, the parent
        session's report turn of each (`message_of(child)` its message); concurrent reporters
        on other replicas skip the rows claimed here."""
        async with self.db.transaction() as conn:
            cursor = await conn.execute(
                f"SELECT {ROW}, {TURN_ROW} FROM subagents s JOIN tasks t ON t.id = s.child_id"
                " LEFT JOIN tasks p ON p.id = s.parent_id"
                f" WHERE s.reported_at IS NULL AND t.status IN {TERMINAL}"
                f" AND (NOT s.waited OR p.status IS NULL OR p.status IN {TERMINAL})"
                " ORDER BY t.finished_at FOR UPDATE OF s SKIP LOCKED"
            )
            children = [_child(row) for row in await cursor.fetchall()]
            now, reports = time.time(), []
            for child in children:
                await conn.execute(
                    "UPDATE subagents SET reported_at = %s WHERE child_id = %s",
                    (now, child.child_id),
                )
                report = Turn(
                    f"{child.child_id}-report", child.parent_session, message_of(child), REPORT_KIND
                )
                await _submit(conn, report, now)
                reports.append(report)
            return reports

    async def steer(self, child_id: str, message: str) -> bool:
        """Leaves a message for a running child; False when it is not running."""
        async with self.db.connection() as conn:
            done = await conn.execute(
                "UPDATE subagents s SET steering = s.steering || %s FROM tasks t"
                f" WHERE s.child_id = %s AND t.id = s.child_id AND t.status IN {ACTIVE}",
                (Jsonb([message]), child_id),
            )
            return done.rowcount > 0

    async def take_steering(self, child_id: str) -> list[str]:
        """The messages left for the child since it last looked (taken: read once)."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "UPDATE subagents s SET steering = '[]' FROM subagents old"
                " WHERE s.child_id = %s AND old.child_id = s.child_id"
                " AND jsonb_array_length(old.steering) > 0 RETURNING old.steering AS taken",
                (child_id,),
            )
            row = await cursor.fetchone()
        return [str(m) for m in row["taken"]] if row else []


async def _submit(conn: Any, turn: Turn, now: float) -> None:
    """crayfish_submit in this transaction: queued for any replica (told at the commit)."""
    cursor = await conn.execute(
        "SELECT created, status FROM crayfish_submit(%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        submit_params(turn, None, now),
    )
    row = await cursor.fetchone()
    submitted(turn, row, now)
