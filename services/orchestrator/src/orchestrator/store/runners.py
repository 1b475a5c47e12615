"""The replicas that run turns (the `runners` table, their liveness marks) and what becomes of a
turn whose runner goes: cancel requests, a turn put back in line, the turns of dead runners."""

from __future__ import annotations

from orchestrator.store.database import Database
from orchestrator.store.events import CANCEL, CHANNEL, QUEUED
from orchestrator.store.turn_rows import COLUMNS, Turn, as_turn


class RunnerRows:
    """TurnStore's statements about runners and the turns they hold."""

    db: Database

    async def requeue(self, task_id: str) -> bool:
        """running -> queued (back at the head of its line, for any replica), for a turn that
        never accepted its message."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "UPDATE tasks SET status = 'queued', started_at = NULL, runner = NULL"
                " WHERE id = %s AND status = 'running' AND NOT accepted"
                " RETURNING pg_notify(%s, %s)",
                (task_id, CHANNEL, QUEUED),
            )
            return await cursor.fetchone() is not None

    async def request_cancel(self, task_id: str) -> str | None:
        """Marks a running turn to be stopped and tells its runner; returns the runner (None:
        the turn is not running)."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "UPDATE tasks SET cancel_requested = true WHERE id = %s AND status = 'running'"
                " RETURNING runner, pg_notify(%s, %s || id)",
                (task_id, CHANNEL, CANCEL),
            )
            row = await cursor.fetchone()
        return row["runner"] if row else None

    async def mark_alive(self, runner: str) -> dict[str, bool]:
        """Marks the runner alive; returns the turns running on it, each with whether its
        cancel was asked."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "WITH beat AS (INSERT INTO runners (name, seen_at) VALUES (%(r)s, crayfish_now())"
                " ON CONFLICT (name) DO UPDATE SET seen_at = excluded.seen_at)"
                " SELECT id, cancel_requested FROM tasks"
                " WHERE runner = %(r)s AND status = 'running'",
                {"r": runner},
            )
            return {row["id"]: row["cancel_requested"] for row in await cursor.fetchall()}

    async def forget_runner(self, runner: str) -> None:
        async with self.db.connection() as conn:
            await conn.execute("DELETE FROM runners WHERE name = %s", (runner,))

    async def stalled(self, silent_for: float) -> list[Turn]:
        """Running turns whose runner left no liveness mark for `silent_for` seconds (or none);
        forgets such runners."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "WITH gone AS (DELETE FROM runners WHERE seen_at < crayfish_now() - %(s)s)"
                f" SELECT {COLUMNS} FROM tasks t WHERE status = 'running' AND NOT EXISTS ("
                " SELECT 1 FROM runners r"
                " WHERE r.name = t.runner AND r.seen_at >= crayfish_now() - %(s)s)",
                {"s": silent_for},
            )
            return [as_turn(row) for row in await cursor.fetchall()]
