"""Schedules in PostgreSQL (table `scheduled_turns`): those of turns that users and the model
create, and the orchestrator's built-in ones (rows marked `builtin`, which only the scheduler
sees); a firing of either moves `next_run` on only if it still holds the value it read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.schedules.schedule_rules import Timing
from orchestrator.store.database import Database
from orchestrator.store.locks import SCHEDULE_LIMIT_LOCK
from orchestrator.store.sessions import pg_text

COLUMNS = (
    "id, session_id, message, kind, at_time, every_seconds, cron, timezone, created_in,"
    " next_run, last_run, last_task_id, runs, created_at, skipped, builtin, model,"
    " deliver_to"
)


@dataclass
class ScheduledTurn:
    """A schedule: its message runs as a turn in `session_id` at each firing."""

    id: str
    session_id: str
    message: str
    timing: Timing
    next_run: float
    created_in: str | None = None
    created_at: float = 0.0
    last_run: float | None = None
    last_task_id: str | None = None
    runs: int = 0
    skipped: int = 0
    builtin: bool = False  # the orchestrator's own (named by `id`), not a user's or the model's
    model: str | None = None  # the preset its turns ask (None: the background model's turn)
    deliver_to: str | None = None  # a channel chat (`channel:chat_id`) its answers go to


class ScheduleStore:
    """Rows of `scheduled_turns`; a firing moves `next_run` only if it still holds the value
    the firing read, so exactly one replica fires each due time."""

    def __init__(self, db: Database):
        self.db = db

    async def add(
        self,
        entry: ScheduledTurn,
        limit_in_session: int | None = None,
        limit_by_model: int | None = None,
    ) -> Literal["session", "model"] | None:
        """Inserts; or, for a schedule the model made (`created_in` set), returns the bound it
        would pass: "session" (`created_in` has `limit_in_session` already) or "model" (the
        model's schedules number `limit_by_model` in all). Checked under one lock, so
        concurrent adds cannot both pass."""
        timing = entry.timing
        async with self.db.transaction() as conn:
            if entry.created_in is not None:
                # One lock for every model-made add: they are rare, and the total is global.
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEDULE_LIMIT_LOCK,))
                cursor = await conn.execute(
                    "SELECT count(*) FILTER (WHERE created_in = %s) AS here, count(*) AS total"
                    " FROM scheduled_turns WHERE created_in IS NOT NULL",
                    (entry.created_in,),
                )
                row = await cursor.fetchone()
                assert row is not None
                if limit_in_session is not None and row["here"] >= limit_in_session:
                    return "session"
                if limit_by_model is not None and row["total"] >= limit_by_model:
                    return "model"
            await conn.execute(
                f"INSERT INTO scheduled_turns ({COLUMNS}) VALUES"
                " (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, NULL, NULL, 0, %s, 0, false, %s, %s)",
                (
                    entry.id,
                    entry.session_id,
                    pg_text(entry.message),
                    timing.kind,
                    timing.at,
                    timing.every,
                    timing.cron,
                    timing.timezone,
                    entry.created_in,
                    entry.next_run,
                    entry.created_at,
                    entry.model,
                    entry.deliver_to,
                ),
            )
        return None

    async def entries(self, session_id: str | None = None) -> list[ScheduledTurn]:
        """Every schedule, soonest first; with `session_id`, those firing in or made in it."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {COLUMNS} FROM scheduled_turns WHERE NOT builtin AND (%(s)s::text IS NULL"
                " OR session_id = %(s)s OR created_in = %(s)s) ORDER BY next_run, id",
                {"s": session_id},
            )
            return [_entry(row) for row in await cursor.fetchall()]

    async def get(self, schedule_id: str) -> ScheduledTurn | None:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {COLUMNS} FROM scheduled_turns WHERE id = %s AND NOT builtin",
                (schedule_id,),
            )
            row = await cursor.fetchone()
        return _entry(row) if row else None

    async def delete(self, schedule_id: str) -> bool:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "DELETE FROM scheduled_turns WHERE id = %s AND NOT builtin RETURNING id",
                (schedule_id,),
            )
            return await cursor.fetchone() is not None

    async def due(
        self, now: float, builtins: Sequence[str] = (), limit: int = 100
    ) -> list[ScheduledTurn]:
        """The schedules due at `now`: the users' and the model's, and of the built-in ones
        those named in `builtins` (the ones this replica runs)."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {COLUMNS} FROM scheduled_turns WHERE next_run <= %s"
                " AND (NOT builtin OR id = ANY(%s)) ORDER BY next_run LIMIT %s",
                (now, list(builtins), limit),
            )
            return [_entry(row) for row in await cursor.fetchall()]

    async def plant(self, name: str, every: float, first_run: float, now: float) -> None:
        """Makes sure the built-in schedule `name` exists, firing every `every` seconds: at
        `first_run` when new or when its time passed while no replica ran it; sooner than its
        stored time when `every` got shorter."""
        async with self.db.connection() as conn:
            await conn.execute(
                f"INSERT INTO scheduled_turns ({COLUMNS}) VALUES (%(name)s, '', '', 'every', NULL,"
                " %(every)s, NULL, NULL, NULL, %(first)s, NULL, NULL, 0, %(now)s, 0, true, NULL,"
                " NULL)"
                " ON CONFLICT (id) DO UPDATE SET every_seconds = %(every)s,"
                " next_run = CASE WHEN scheduled_turns.next_run < %(now)s THEN %(first)s"
                " ELSE least(scheduled_turns.next_run, %(now)s + %(every)s) END"
                " WHERE scheduled_turns.builtin",
                {"name": name, "every": every, "first": first_run, "now": now},
            )

    async def advance(
        self, entry: ScheduledTurn, following: float | None, task_id: str | None, now: float
    ) -> bool:
        """Records the firing of `entry` (due at its `next_run`): moves it to `following`, or
        deletes it when None. False if another replica recorded it first."""
        async with self.db.connection() as conn:
            if following is None:
                cursor = await conn.execute(
                    "DELETE FROM scheduled_turns WHERE id = %s AND next_run = %s RETURNING id",
                    (entry.id, entry.next_run),
                )
            else:
                cursor = await conn.execute(
                    "UPDATE scheduled_turns SET next_run = %s, last_run = %s,"
                    " last_task_id = %s, runs = runs + 1"
                    " WHERE id = %s AND next_run = %s RETURNING id",
                    (following, now, task_id, entry.id, entry.next_run),
                )
            return await cursor.fetchone() is not None

    async def previous_busy(self, entry: ScheduledTurn) -> str | None:
        """The status of the schedule's last firing's task if it is still queued or running."""
        if entry.last_task_id is None:
            return None
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT status FROM tasks WHERE id = %s AND status IN ('queued', 'running')",
                (entry.last_task_id,),
            )
            row = await cursor.fetchone()
        return str(row["status"]) if row else None

    async def skip(self, entry: ScheduledTurn, following: float) -> bool:
        """Records that the firing due at `entry.next_run` was skipped and moves it on to
        `following`; False if another replica recorded this due time first."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "UPDATE scheduled_turns SET next_run = %s, skipped = skipped + 1"
                " WHERE id = %s AND next_run = %s RETURNING id",
                (following, entry.id, entry.next_run),
            )
            return await cursor.fetchone() is not None


def _entry(row: dict[str, Any]) -> ScheduledTurn:
    timing = Timing(
        row["kind"],
        at=row["at_time"],
        every=row["every_seconds"],
        cron=row["cron"],
        timezone=row["timezone"],
    )
    return ScheduledTurn(
        id=str(row["id"]),
        session_id=str(row["session_id"]),
        message=str(row["message"]),
        timing=timing,
        next_run=float(row["next_run"]),
        created_in=row["created_in"],
        created_at=float(row["created_at"]),
        last_run=row["last_run"],
        last_task_id=row["last_task_id"],
        runs=int(row["runs"]),
        skipped=int(row["skipped"]),
        builtin=bool(row["builtin"]),
        model=row["model"],
        deliver_to=row["deliver_to"],
    )
