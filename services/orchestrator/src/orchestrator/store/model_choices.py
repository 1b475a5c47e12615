"""Which model preset a session uses and which one a request asked for its turn
(0012_models.sql); the names are checked against the presets before they are stored."""

from __future__ import annotations

import time

from orchestrator.store.database import Database
from orchestrator.store.sessions import check_session_id


class ModelChoices:
    """Sessions' presets and turns' asked presets, by id."""

    def __init__(self, db: Database):
        self.db = db

    async def prune(self, before: float) -> None:
        """Forgets the models turns asked for before `before` (long run by then)."""
        async with self.db.connection() as conn:
            await conn.execute("DELETE FROM turn_models WHERE created_at < %s", (before,))

    async def ask(self, task_id: str, model: str) -> None:
        """Written before the task is queued: whichever replica runs it reads it."""
        async with self.db.connection() as conn:
            await conn.execute(
                "INSERT INTO turn_models (task_id, model, created_at) VALUES (%s, %s, %s)"
                " ON CONFLICT (task_id) DO NOTHING",
                (task_id, model, time.time()),
            )

    async def set_session(self, session_id: str, model: str | None) -> bool:
        """The session's preset (None: the default again); False when there is no session."""
        check_session_id(session_id)
        async with self.db.connection() as conn:
            done = await conn.execute(
                "UPDATE sessions SET model = %s WHERE id = %s", (model, session_id)
            )
            return done.rowcount > 0

    async def of_session(self, session_id: str) -> str | None:
        check_session_id(session_id)
        async with self.db.connection() as conn:
            cursor = await conn.execute("SELECT model FROM sessions WHERE id = %s", (session_id,))
            row = await cursor.fetchone()
        return row["model"] if row else None

    async def for_turn(self, task_id: str, session_id: str) -> tuple[str | None, str | None]:
        """(the preset the turn's request asked for, the session's), in one statement."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT (SELECT model FROM turn_models WHERE task_id = %s) AS asked,"
                " (SELECT model FROM sessions WHERE id = %s) AS chosen",
                (task_id, session_id),
            )
            row = await cursor.fetchone()
        return (row["asked"], row["chosen"]) if row else (None, None)
