"""LLM requests and usage budgets in PostgreSQL: each request's row, sums by day, session,
model or kind, the workspace's caps, and the one alert per cap and day."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

from orchestrator.agent.llm_record import BACKGROUND_KINDS, LLMRequestRecord
from orchestrator.store.database import Database

Grouping = Literal["day", "session", "model", "kind"]
GROUPINGS: tuple[Grouping, ...] = ("day", "session", "model", "kind")

# The SQL that names each row's group; `day` is the request's date in the given time zone.
_GROUP_SQL: dict[Grouping, str] = {
    "day": "to_char(to_timestamp(at) AT TIME ZONE %(tz)s, 'YYYY-MM-DD')",
    "session": "session_id",
    "model": "model",
    "kind": "kind",
}


@dataclass(frozen=True)
class UsageRow:
    """The requests of one group, summed."""

    key: str
    requests: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    price: float | None  # USD; None when no request of the group had a price

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Budget:
    """Daily caps (None: no cap), all turns together and background turns alone."""

    daily_tokens: int | None = None
    daily_usd: float | None = None
    background_daily_tokens: int | None = None
    background_daily_usd: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Spend:
    tokens: int
    usd: float


class UsageStore:
    """Rows of `llm_requests`, `usage_budget` and `usage_alerts`."""

    def __init__(self, db: Database):
        self.db = db

    async def prune(self, before: float) -> int:
        """Deletes the records of LLM requests (and the alerts) older than `before`."""
        async with self.db.connection() as conn:
            cursor = await conn.execute("DELETE FROM llm_requests WHERE at < %s", (before,))
            await conn.execute("DELETE FROM usage_alerts WHERE at < %s", (before,))
            return cursor.rowcount

    async def record(self, record: LLMRequestRecord) -> None:
        origin = record.origin
        async with self.db.connection() as conn:
            await conn.execute(
                "INSERT INTO llm_requests (at, session_id, task_id, kind, preset, model,"
                " prompt_tokens, completion_tokens, cached_tokens, latency_ms, price, error)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    record.at,
                    origin.session_id,
                    origin.task_id,
                    origin.kind,
                    record.preset,
                    record.model,
                    record.prompt_tokens,
                    record.completion_tokens,
                    record.cached_tokens,
                    record.latency_ms,
                    record.price,
                    record.error,
                ),
            )

    async def summary(
        self, by: Grouping, since: float, until: float, timezone: str
    ) -> list[UsageRow]:
        """The requests in [since, until) summed per group, in the group's order (days
        oldest first, the others most tokens first)."""
        key = _GROUP_SQL[by]
        order = "1" if by == "day" else "sum(prompt_tokens + completion_tokens) DESC, 1"
        query = (
            f"SELECT {key} AS key, count(*) AS requests,"
            " count(*) FILTER (WHERE error <> '') AS failed,"
            " coalesce(sum(prompt_tokens), 0) AS prompt_tokens,"
            " coalesce(sum(completion_tokens), 0) AS completion_tokens,"
            " coalesce(sum(cached_tokens), 0) AS cached_tokens, sum(price) AS price"
            " FROM llm_requests WHERE at >= %(since)s AND at < %(until)s"
            f" GROUP BY 1 ORDER BY {order}"
        )
        params = {"tz": timezone, "since": since, "until": until}
        async with self.db.connection() as conn:
            rows = await (await conn.execute(query, params)).fetchall()
        return [
            UsageRow(
                key=row["key"],
                requests=row["requests"],
                failed=row["failed"],
                prompt_tokens=int(row["prompt_tokens"]),
                completion_tokens=int(row["completion_tokens"]),
                cached_tokens=int(row["cached_tokens"]),
                price=row["price"],
            )
            for row in rows
        ]

    async def spent_since(self, since: float) -> tuple[Spend, Spend]:
        """(all requests, background requests) since then: tokens and USD."""
        query = (
            "SELECT coalesce(sum(prompt_tokens + completion_tokens), 0) AS tokens,"
            " coalesce(sum(price), 0) AS usd,"
            " coalesce(sum(prompt_tokens + completion_tokens)"
            "  FILTER (WHERE kind = ANY(%(bg)s)), 0) AS bg_tokens,"
            " coalesce(sum(price) FILTER (WHERE kind = ANY(%(bg)s)), 0) AS bg_usd"
            " FROM llm_requests WHERE at >= %(since)s"
        )
        params = {"since": since, "bg": sorted(BACKGROUND_KINDS)}
        async with self.db.connection() as conn:
            row = await (await conn.execute(query, params)).fetchone()
        assert row is not None
        return (
            Spend(int(row["tokens"]), float(row["usd"])),
            Spend(int(row["bg_tokens"]), float(row["bg_usd"])),
        )

    async def budget(self) -> Budget:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT daily_tokens, daily_usd, background_daily_tokens, background_daily_usd"
                " FROM usage_budget"
            )
            row = await cursor.fetchone()
        return Budget(**row) if row else Budget()

    async def put_budget(self, budget: Budget) -> None:
        values = budget.as_dict()
        async with self.db.connection() as conn:
            await conn.execute(
                "INSERT INTO usage_budget (id, daily_tokens, daily_usd, background_daily_tokens,"
                " background_daily_usd, updated_at) VALUES (true, %(daily_tokens)s,"
                " %(daily_usd)s, %(background_daily_tokens)s, %(background_daily_usd)s, %(at)s)"
                " ON CONFLICT (id) DO UPDATE SET daily_tokens = EXCLUDED.daily_tokens,"
                " daily_usd = EXCLUDED.daily_usd,"
                " background_daily_tokens = EXCLUDED.background_daily_tokens,"
                " background_daily_usd = EXCLUDED.background_daily_usd,"
                " updated_at = EXCLUDED.updated_at",
                {**values, "at": time.time()},
            )

    async def first_alert(self, day: str, cap: str) -> bool:
        """True for the first caller to report `cap` passed on `day` (any replica)."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "INSERT INTO usage_alerts (day, cap, at) VALUES (%s, %s, %s)"
                " ON CONFLICT DO NOTHING RETURNING cap",
                (day, cap, time.time()),
            )
            return await cursor.fetchone() is not None
