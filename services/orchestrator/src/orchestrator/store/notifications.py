"""Notifications in PostgreSQL: counted per turn and per hour under one lock (every replica sees
the same counts), and read by each webhook's deliveries from its cursor, several at once."""

from __future__ import annotations

import time
from typing import Any, Literal

from psycopg.types.json import Json

from orchestrator.store.database import Database
from orchestrator.store.locks import NOTIFY_LIMIT_LOCK

HOUR = 3600.0
TURN_HORIZON = 24 * HOUR  # a turn's notifications are counted this far back (no turn is longer)
KEEP_FOR = 7 * 24 * HOUR  # rows older than this are pruned (their deliveries long done)


class NotificationStore:
    """Rows of `notifications`, and each webhook's cursor in `webhook_cursors`."""

    def __init__(self, db: Database):
        self.db = db

    async def add(
        self,
        note: dict[str, Any],
        turn_id: str,
        per_turn: int,
        per_hour: int,
        webhooks: list[str],
    ) -> int | Literal["turn", "hour"]:
        """Keeps `note` and returns its sequence number; or returns the bound it would pass:
        "turn" (its turn sent `per_turn` already) or "hour" (`per_hour` were sent, all turns
        together, in the last hour). A webhook (by fingerprint) new to the store gets a cursor
        just before `note`, in the same transaction: notes numbered at once by several turns
        cannot start it past an earlier one (which it would never get)."""
        now = time.time()
        async with self.db.transaction() as conn:
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (NOTIFY_LIMIT_LOCK,))
            cursor = await conn.execute(
                "SELECT count(*) FILTER (WHERE turn_id = %s) AS turn,"
                " count(*) FILTER (WHERE created_at > %s) AS hour"
                " FROM notifications WHERE created_at > %s",
                (turn_id, now - HOUR, now - TURN_HORIZON),
            )
            row = await cursor.fetchone()
            assert row is not None
            if row["turn"] >= per_turn:
                return "turn"
            if row["hour"] >= per_hour:
                return "hour"
            await conn.execute("DELETE FROM notifications WHERE created_at < %s", (now - KEEP_FOR,))
            added = await conn.execute(
                "INSERT INTO notifications (id, turn_id, created_at, note)"
                " VALUES (%s, %s, %s, %s) RETURNING seq",
                (note["id"], turn_id, now, Json(note)),
            )
            inserted = await added.fetchone()
            assert inserted is not None
            seq = int(inserted["seq"])
            for fingerprint in webhooks:  # a new one gets nothing older than this note
                await conn.execute(
                    "INSERT INTO webhook_cursors (fingerprint, seq, sent_at) VALUES (%s, %s, 0)"
                    " ON CONFLICT (fingerprint) DO NOTHING",
                    (fingerprint, seq - 1),
                )
            return seq

    async def last_sent(self, fingerprint: str) -> float:
        """When the webhook last had a delivery (0: never)."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT sent_at FROM webhook_cursors WHERE fingerprint = %s", (fingerprint,)
            )
            row = await cursor.fetchone()
        return float(row["sent_at"]) if row else 0.0

    async def pending(self, fingerprint: str, limit: int) -> list[tuple[int, dict[str, Any]]]:
        """Up to `limit` notifications past the webhook's cursor, oldest first (seq, note)."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT n.seq, n.note FROM webhook_cursors c JOIN notifications n ON n.seq > c.seq"
                " WHERE c.fingerprint = %s ORDER BY n.seq LIMIT %s",
                (fingerprint, limit),
            )
            rows = await cursor.fetchall()
        return [(int(r["seq"]), dict(r["note"])) for r in rows]

    async def delivered(self, fingerprint: str, seq: int) -> None:
        """Moves the webhook's cursor past `seq` (never back), now."""
        async with self.db.connection() as conn:
            await conn.execute(
                "UPDATE webhook_cursors SET seq = greatest(seq, %s), sent_at = %s"
                " WHERE fingerprint = %s",
                (seq, time.time(), fingerprint),
            )
