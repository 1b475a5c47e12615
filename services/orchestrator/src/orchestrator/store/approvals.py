"""Exec policies and approvals in PostgreSQL: a question is a row any replica may answer (the
first answer wins, in one statement), and the turn that asked reads it back."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from psycopg.errors import UniqueViolation
from psycopg.types.json import Json

from orchestrator.store.database import Database

COLUMNS = (
    "a.id, a.task_id, a.session_id, a.call_id, a.command, a.workdir, a.programs, a.missing,"
    " a.reason, a.status, a.decision, a.created_at, a.expires_at, a.decided_at,"
    " t.status AS task_status"
)


@dataclass(frozen=True)
class ApprovalRow:
    """One question as stored, with its task's status."""

    id: str
    task_id: str
    session_id: str
    call_id: str
    command: str
    workdir: str
    programs: list[str]
    missing: list[str]
    reason: str
    status: str
    decision: str | None
    created_at: float
    expires_at: float
    decided_at: float | None
    task_status: str


class IdTaken(RuntimeError):
    """The approval id exists already (pick another)."""


class ApprovalStore:
    def __init__(self, db: Database):
        self.db = db

    async def policy(self, workspace: str) -> dict[str, Any] | None:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT policy FROM exec_policies WHERE workspace = %s", (workspace,)
            )
            row = await cursor.fetchone()
        return dict(row["policy"]) if row else None

    async def put_policy(self, workspace: str, policy: dict[str, Any]) -> None:
        async with self.db.connection() as conn:
            await conn.execute(
                "INSERT INTO exec_policies (workspace, policy, updated_at) VALUES (%s, %s, %s)"
                " ON CONFLICT (workspace) DO UPDATE SET policy = excluded.policy,"
                " updated_at = excluded.updated_at",
                (workspace, Json(policy), time.time()),
            )

    async def add_entries(
        self, workspace: str, default: dict[str, Any], entries: list[str]
    ) -> None:
        """Adds allowlist entries to the stored policy (`default` when none is), under a row
        lock: two answers at once both land."""
        async with self.db.transaction() as conn:
            await conn.execute(
                "INSERT INTO exec_policies (workspace, policy, updated_at) VALUES (%s, %s, %s)"
                " ON CONFLICT (workspace) DO NOTHING",
                (workspace, Json(default), time.time()),
            )
            cursor = await conn.execute(
                "SELECT policy FROM exec_policies WHERE workspace = %s FOR UPDATE", (workspace,)
            )
            row = await cursor.fetchone()
            assert row is not None
            policy = dict(row["policy"])
            listed = list(policy.get("allowlist") or [])
            policy["allowlist"] = listed + [e for e in entries if e not in listed]
            await conn.execute(
                "UPDATE exec_policies SET policy = %s, updated_at = %s WHERE workspace = %s",
                (Json(policy), time.time(), workspace),
            )

    async def add(self, row: ApprovalRow) -> None:
        """Records a pending question; IdTaken when its id exists."""
        try:
            async with self.db.connection() as conn:
                await conn.execute(
                    "INSERT INTO approvals (id, task_id, session_id, call_id, command, workdir,"
                    " programs, missing, reason, status, created_at, expires_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 'pending', %s, %s)",
                    (
                        row.id,
                        row.task_id,
                        row.session_id,
                        row.call_id,
                        row.command,
                        row.workdir,
                        Json(row.programs),
                        Json(row.missing),
                        row.reason,
                        row.created_at,
                        row.expires_at,
                    ),
                )
        except UniqueViolation as exc:
            raise IdTaken(row.id) from exc

    async def get(self, approval_id: str) -> ApprovalRow | None:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {COLUMNS} FROM approvals a JOIN tasks t ON t.id = a.task_id"
                " WHERE a.id = %s",
                (approval_id,),
            )
            row = await cursor.fetchone()
        return ApprovalRow(**row) if row else None

    async def pending(self) -> list[ApprovalRow]:
        """Unanswered questions of running turns, oldest first."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {COLUMNS} FROM approvals a JOIN tasks t ON t.id = a.task_id"
                " WHERE a.status = 'pending' AND t.status = 'running' ORDER BY a.created_at"
            )
            return [ApprovalRow(**row) for row in await cursor.fetchall()]

    async def waiting_tasks(self, task_ids: list[str]) -> set[str]:
        """Which of these tasks wait for an answer now."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT DISTINCT task_id FROM approvals WHERE status = 'pending'"
                " AND task_id = ANY(%s)",
                (task_ids,),
            )
            return {row["task_id"] for row in await cursor.fetchall()}

    async def settle(self, approval_id: str, status: str, decision: str) -> bool:
        """Answers a pending question of a running turn; False if it was answered already
        (or its turn ended): the first answer wins."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "UPDATE approvals a SET status = %s, decision = %s, decided_at = %s"
                " FROM tasks t WHERE a.id = %s AND a.status = 'pending' AND t.id = a.task_id"
                " AND t.status = 'running' RETURNING a.id",
                (status, decision, time.time(), approval_id),
            )
            return await cursor.fetchone() is not None
