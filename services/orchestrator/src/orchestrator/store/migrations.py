"""Versioned schema migrations: numbered steps, a version table, one replica migrating at once.

Plain SQL files rather than alembic: the store is written with psycopg and SQL, not SQLAlchemy
(which alembic needs, with its own engine and configuration); the steps are few, forward-only,
and each runs in the one transaction that records it, so a failed upgrade changes nothing.
The current body of every SQL function is in sql/functions.sql, applied after the steps on every
start (a step's CREATE FUNCTION is its history, not its current form).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from procrastinate.schema import SchemaManager

from orchestrator.store.locks import MIGRATION_LOCK

log = logging.getLogger(__name__)


def sql_file(name: str) -> Callable[[], str]:
    return lambda: resources.files("orchestrator.store").joinpath("sql", name).read_text()


def procrastinate_schema() -> str:
    """The job queue's tables and functions as the pinned procrastinate release ships them.
    A later release's upgrade is a new step applying its files from procrastinate/sql/migrations."""
    return SchemaManager.get_schema()


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: Callable[[], str]


MIGRATIONS = [
    Migration(1, "store: sessions, tasks, events", sql_file("0001_store.sql")),
    Migration(2, "job queue: procrastinate 3.10 schema", procrastinate_schema),
    Migration(3, "schedules of turns; images of tasks", sql_file("0003_schedules_images.sql")),
    Migration(4, "skipped firings of schedules", sql_file("0004_schedule_skips.sql")),
    Migration(5, "a turn's events in one statement", sql_file("0005_event_batches.sql")),
    Migration(6, "turns claimed from their sessions' lines", sql_file("0006_turn_line.sql")),
    Migration(
        7, "failed turns' causes; requests that started turns", sql_file("0007_turn_requests.sql")
    ),
    Migration(8, "notifications, and webhooks' cursors", sql_file("0008_notifications.sql")),
    Migration(9, "OpenAI-compatible turns and conversations", sql_file("0009_openai_turns.sql")),
    Migration(10, "built-in schedules in scheduled_turns", sql_file("0010_builtin_schedules.sql")),
    Migration(11, "LLM requests, usage budgets and alerts", sql_file("0011_usage.sql")),
    Migration(12, "model presets of sessions and turns", sql_file("0012_models.sql")),
    Migration(13, "exec policies and approvals", sql_file("0013_approvals.sql")),
    Migration(14, "model presets of schedules", sql_file("0014_schedule_models.sql")),
    Migration(15, "subagents: child turns and their parents", sql_file("0015_subagents.sql")),
    Migration(
        17, "session summaries and memory consolidations", sql_file("0017_session_summaries.sql")
    ),
    Migration(18, "channels: pairings and replies owed", sql_file("0018_channels.sql")),
    Migration(19, "channel chats as delivery targets", sql_file("0019_channel_deliveries.sql")),
    Migration(20, "one counter of what a channel owes", sql_file("0020_channel_owed.sql")),
]

# The current definition of every function, re-applied with CREATE OR REPLACE after the steps.
FUNCTIONS = sql_file("functions.sql")


async def migrate(conn: Any) -> list[int]:
    """Applies the steps this database lacks, in order, then the functions file; returns the
    steps' versions."""
    applied: list[int] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS crayfish_schema_version ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at double precision NOT NULL)"
        )
        rows = await (await conn.execute("SELECT version FROM crayfish_schema_version")).fetchall()
        done = {_first(row) for row in rows}
        for step in MIGRATIONS:
            if step.version in done:
                continue
            await conn.execute(step.sql())
            await conn.execute(
                "INSERT INTO crayfish_schema_version (version, name, applied_at)"
                " VALUES (%s, %s, %s)",
                (step.version, step.name, time.time()),
            )
            applied.append(step.version)
        newer = max(done, default=0) > MIGRATIONS[-1].version
        if newer:  # a newer release's functions stay: this replica's would be older
            log.warning(
                "database schema version %d is newer than this release knows (%d): "
                "its SQL functions are left as they are",
                max(done),
                MIGRATIONS[-1].version,
            )
        else:
            await conn.execute(FUNCTIONS())
    if applied:
        log.info("database schema migrated to version %d", applied[-1])
    return applied


def _first(row: Any) -> Any:
    return next(iter(row.values())) if isinstance(row, dict) else row[0]
