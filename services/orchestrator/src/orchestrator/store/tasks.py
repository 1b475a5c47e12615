"""Tasks (one chat turn each) in PostgreSQL: created with their job, started, finished once.

A turn's writes to its session are fenced: they commit only while the task is still `running`,
so a run that was declared dead (and whose session lock was freed) can never write after the
next run has begun.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from psycopg.types.json import Json, Jsonb

from orchestrator.store.database import SESSION_LOCK, Connection, Database
from orchestrator.store.events import CHANNEL, ENDED, EventStore
from orchestrator.store.sessions import append_records, pg_text
from orchestrator.store.transcripts import TranscriptMirror

TaskStatus = Literal["queued", "running", "completed", "failed", "cancelled", "interrupted"]
TERMINAL_STATUSES = ("completed", "failed", "cancelled", "interrupted")
COLUMNS = (
    "id, session_id, kind, message, status, result, error, delivered, usage, accepted,"
    " job_id, created_at, started_at, finished_at, images"
)


class TurnInterrupted(RuntimeError):
    """The task is no longer running (declared interrupted or cancelled elsewhere)."""


def zero_usage() -> dict[str, int]:
    return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


@dataclass
class Task:
    id: str
    session_id: str
    message: str
    kind: str = "chat"
    status: TaskStatus = "queued"
    result: str | None = None
    error: str | None = None
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    usage: dict[str, int] = field(default_factory=zero_usage)
    delivered: bool = True
    accepted: bool = False
    job_id: int | None = None
    # references to the message's images in the workspace (media.py), not their bytes
    images: list[dict[str, Any]] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.status in TERMINAL_STATUSES


class TaskStore:
    """Task rows and the transitions a turn goes through, each in one transaction."""

    def __init__(self, db: Database, events: EventStore, mirror: TranscriptMirror | None = None):
        self.db = db
        self.events = events
        self.mirror = mirror or TranscriptMirror(None)

    async def create(self, task: Task, enqueue: Callable[[Connection], Awaitable[int]]) -> None:
        """Records the task, its `task.queued` event and its job (from `enqueue`) together:
        once this returns the message is acknowledged, and nothing of it exists if it fails.
        A task id that exists already is left as it is."""
        async with self.db.transaction() as conn:
            cursor = await conn.execute(
                "INSERT INTO tasks (id, session_id, kind, message, status, created_at, images)"
                " VALUES (%s, %s, %s, %s, 'queued', %s, %s)"
                " ON CONFLICT (id) DO NOTHING RETURNING id",
                (
                    task.id,
                    task.session_id,
                    task.kind,
                    pg_text(task.message),
                    task.created_at,
                    Json(task.images),
                ),
            )
            if await cursor.fetchone() is None:
                return
            await self.events.add(
                task.id, "task.queued", {"session_id": task.session_id, "kind": task.kind}, conn
            )
            task.job_id = await enqueue(conn)
            await conn.execute("UPDATE tasks SET job_id = %s WHERE id = %s", (task.job_id, task.id))

    async def get(self, task_id: str) -> Task | None:
        async with self.db.connection() as conn:
            cursor = await conn.execute(f"SELECT {COLUMNS} FROM tasks WHERE id = %s", (task_id,))
            row = await cursor.fetchone()
        return _task(row) if row else None

    async def active(self, session_id: str | None = None, kind: str | None = None) -> list[Task]:
        """Queued or running tasks, oldest first (of one session or kind when given)."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {COLUMNS} FROM tasks WHERE status IN ('queued', 'running')"
                " AND (%(s)s::text IS NULL OR session_id = %(s)s)"
                " AND (%(k)s::text IS NULL OR kind = %(k)s) ORDER BY created_at",
                {"s": session_id, "k": kind},
            )
            return [_task(row) for row in await cursor.fetchall()]

    async def count_active(self) -> int:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT count(*) AS n FROM tasks WHERE status IN ('queued', 'running')"
            )
            row = await cursor.fetchone()
            return int(row["n"]) if row else 0

    async def start(self, task_id: str, runner: str) -> Task | None:
        """queued -> running (with `task.started`), or None when the task is no longer queued.
        Waits while the session is being deleted."""
        async with self.db.transaction() as conn:
            # The task's session, locked (as lock_session does) in the same statement.
            cursor = await conn.execute(
                "SELECT session_id, pg_advisory_xact_lock(%s, hashtext(session_id))"
                " FROM tasks WHERE id = %s",
                (SESSION_LOCK, task_id),
            )
            if await cursor.fetchone() is None:
                return None
            cursor = await conn.execute(
                "UPDATE tasks SET status = 'running', started_at = %s, runner = %s"
                f" WHERE id = %s AND status = 'queued' RETURNING {COLUMNS}",
                (time.time(), runner, task_id),
            )
            row = await cursor.fetchone()
            if row is None:
                return None
            task = _task(row)
            data = {"session_id": task.session_id, "kind": task.kind}
            await self.events.add(task.id, "task.started", data, conn)
            return task

    async def accept(self, task: Task, message: dict[str, Any]) -> None:
        """Appends the task's message to its session and marks it accepted, together."""
        async with self.db.transaction() as conn:
            # Marked and fenced in one statement: the row lock is _still_running's.
            cursor = await conn.execute(
                "UPDATE tasks SET accepted = true WHERE id = %s RETURNING status", (task.id,)
            )
            _running_or_raise(await cursor.fetchone())
            await append_records(conn, task.session_id, [("message", message)])
            await self.mirror.claim(conn, task.session_id)
        task.accepted = True
        self.mirror.record(task.session_id, [message])

    async def append_turn(self, task: Task, messages: list[dict[str, Any]]) -> None:
        """Appends a message group of the running task to its session (fenced)."""
        if not messages:
            return
        async with self.db.transaction() as conn:
            await _still_running(conn, task.id)
            await append_records(conn, task.session_id, [("message", m) for m in messages])
            await self.mirror.claim(conn, task.session_id)
        self.mirror.record(task.session_id, messages)

    async def finish(
        self, task: Task, status: TaskStatus, event: str, summary: dict[str, Any]
    ) -> bool:
        """Ends a queued or running task with its terminal event; False if it had ended."""
        task.finished_at = time.time()
        async with self.db.transaction() as conn:
            cursor = await conn.execute(
                "UPDATE tasks SET status = %s, result = %s, error = %s, delivered = %s,"
                " usage = %s, finished_at = %s"
                " WHERE id = %s AND status IN ('queued', 'running')"
                " RETURNING id, pg_notify(%s, %s || id)",
                (
                    status,
                    pg_text(task.result),
                    pg_text(task.error),
                    task.delivered,
                    Jsonb(task.usage),
                    task.finished_at,
                    task.id,
                    CHANNEL,
                    ENDED,
                ),
            )
            if await cursor.fetchone() is None:
                return False
            await self.events.add(task.id, event, {"session_id": task.session_id, **summary}, conn)
        task.status = status
        return True

    async def requeue(self, task_id: str) -> None:
        """running -> queued, for a turn whose worker died before it accepted its message."""
        async with self.db.connection() as conn:
            await conn.execute(
                "UPDATE tasks SET status = 'queued', started_at = NULL"
                " WHERE id = %s AND status = 'running' AND NOT accepted",
                (task_id,),
            )

    async def by_jobs(self, job_ids: list[int]) -> dict[int, Task]:
        """The tasks of these jobs, by job id."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {COLUMNS} FROM tasks WHERE job_id = ANY(%s)", (job_ids,)
            )
            return {row["job_id"]: _task(row) for row in await cursor.fetchall()}


async def _still_running(conn: Connection, task_id: str) -> None:
    cursor = await conn.execute("SELECT status FROM tasks WHERE id = %s FOR UPDATE", (task_id,))
    _running_or_raise(await cursor.fetchone())


def _running_or_raise(row: dict[str, Any] | None) -> None:
    """Fences a turn's writes: they go on only while its task is running (not ended or taken
    over elsewhere); the caller's transaction holds the task's row."""
    if row is None or row["status"] != "running":
        status = row["status"] if row else "gone"
        raise TurnInterrupted(f"the task is {status}: its turn no longer writes to the session")


def _task(row: dict[str, Any]) -> Task:
    return Task(**row)
