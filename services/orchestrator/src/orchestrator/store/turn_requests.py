"""The requests that started turns (0007_turn_requests.sql): a client's retry of one, arriving at
any replica, finds the turn it started instead of starting another."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from orchestrator.store.database import Database
from orchestrator.store.turns import Turn, submit_params, submitted

# What an earlier request must be for a new one to repeat it: "key" the same Idempotency-Key;
# "retry" (a client's declared retry) the same fingerprint, its turn running or ended within the
# window; "failed" (a plain repeat) the same fingerprint, its turn failed or was interrupted
# within the window;
# "none" nothing (the request is recorded, for its own retries to find).
Match = Literal["key", "retry", "failed", "none"]
KEPT_FOR = 24 * 3600.0  # seconds a request is remembered (an Idempotency-Key's lifetime)


@dataclass(frozen=True)
class TurnRequest:
    """A request that asks for a turn: its route, the hash of what it asked (fingerprint), the
    client's Idempotency-Key, and how an earlier one is recognised."""

    route: str
    fingerprint: str
    key: str | None
    match: Match
    window: float

    def params(self) -> tuple[object, ...]:
        return (self.route, self.fingerprint, self.key, self.match, self.window)


@dataclass(frozen=True)
class Earlier:
    """The earlier request a new one repeats: its turn, and what it asked."""

    task_id: str
    fingerprint: str


class TurnRequests:
    """Finds the request a new one repeats; records new ones with their turns, atomically."""

    def __init__(self, db: Database):
        self.db = db

    async def earlier(self, request: TurnRequest) -> Earlier | None:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT task_id, fingerprint"
                " FROM crayfish_earlier_request(%s, %s, %s, %s, %s, %s) LIMIT 1",
                (*request.params(), time.time()),
            )
            row = await cursor.fetchone()
        return Earlier(row["task_id"], row["fingerprint"]) if row else None

    async def submit(self, turn: Turn, runner: str | None, request: TurnRequest) -> Earlier | None:
        """TurnStore.submit for a request: the earlier request it repeats (nothing submitted),
        or None once the turn and its request are recorded."""
        now = time.time()
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT created, status, earlier, earlier_fingerprint FROM"
                " crayfish_submit_request(%s, %s, %s, %s, %s,"
                " %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (*request.params(), *submit_params(turn, runner, now)),
            )
            row = await cursor.fetchone()
        assert row is not None
        if row["earlier"] is not None:
            return Earlier(row["earlier"], row["earlier_fingerprint"])
        submitted(turn, row, now)
        return None

    async def prune(self, before: float) -> int:
        """Forgets requests made before `before`; returns how many."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "DELETE FROM turn_requests WHERE created_at < %s", (before,)
            )
            return cursor.rowcount
