"""Schedules that fire once across replicas: each replica asks, one wins each period."""

from __future__ import annotations

import time

from orchestrator.store.database import Database


async def claim(db: Database, name: str, every: float) -> bool:
    """True for exactly one caller per `every` seconds, whichever replica asks first."""
    now = time.time()
    async with db.connection() as conn:
        cursor = await conn.execute(
            "INSERT INTO schedules (name, due_at) VALUES (%(name)s, %(next)s)"
            " ON CONFLICT (name) DO UPDATE SET due_at = %(next)s"
            " WHERE schedules.due_at <= %(now)s RETURNING name",
            {"name": name, "next": now + every * 0.9, "now": now},
        )
        return await cursor.fetchone() is not None
