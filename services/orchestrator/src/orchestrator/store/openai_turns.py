"""The OpenAI-compatible API's rows (0009_openai_turns.sql): what a client asked of a turn and
what the turn answered beyond its text, and the digest of each /v1 conversation."""

from __future__ import annotations

import time
from typing import Any

from psycopg.types.json import Json

from orchestrator.store.database import Database


class OpenAITurnStore:
    """Turn requests and answers by task id; conversation digests by session."""

    def __init__(self, db: Database):
        self.db = db

    async def put_request(self, task_id: str, request: dict[str, Any]) -> None:
        """Written before the task is queued: whichever replica claims it reads it."""
        async with self.db.connection() as conn:
            await conn.execute(
                "INSERT INTO openai_turns (task_id, request, created_at) VALUES (%s, %s, %s)"
                " ON CONFLICT (task_id) DO NOTHING",
                (task_id, Json(request), time.time()),
            )

    async def request(self, task_id: str) -> dict[str, Any]:
        row = await self._row(task_id)
        return row["request"] if row else {}

    async def put_answer(self, task_id: str, answer: dict[str, Any]) -> None:
        async with self.db.connection() as conn:
            await conn.execute(
                "UPDATE openai_turns SET answer = %s WHERE task_id = %s", (Json(answer), task_id)
            )

    async def answer(self, task_id: str) -> dict[str, Any]:
        row = await self._row(task_id)
        return (row["answer"] or {}) if row else {}

    async def _row(self, task_id: str) -> dict[str, Any] | None:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT request, answer FROM openai_turns WHERE task_id = %s", (task_id,)
            )
            return await cursor.fetchone()

    async def remember(self, session_id: str, digest: str) -> None:
        """The session's conversation as its client now holds it (a session deleted
        meanwhile is not remembered)."""
        async with self.db.connection() as conn:
            await conn.execute(
                "INSERT INTO openai_conversations (session_id, digest, updated_at)"
                " SELECT id, %(d)s, %(t)s FROM sessions WHERE id = %(s)s"
                " ON CONFLICT (session_id) DO UPDATE"
                " SET digest = excluded.digest, updated_at = excluded.updated_at",
                {"s": session_id, "d": digest, "t": time.time()},
            )

    async def sessions_of(self, digests: list[str]) -> dict[str, str]:
        """The sessions whose conversation is one of these digests: {digest: session id}."""
        if not digests:
            return {}
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT digest, session_id FROM openai_conversations WHERE digest = ANY(%s)"
                " ORDER BY updated_at",
                (digests,),
            )
            return {row["digest"]: row["session_id"] for row in await cursor.fetchall()}
