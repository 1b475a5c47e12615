"""A running turn's writes, fenced (they commit only while it is still `running`, so a run that
was declared dead can never write after the next run has begun): its messages, its failure and
its outcome."""

from __future__ import annotations

import time
from typing import Any

from psycopg.types.json import Json, Jsonb

from orchestrator.store.database import Database
from orchestrator.store.events import StoredEvent
from orchestrator.store.sessions import Fence, RecordsToAppend, SessionStore, pg_text
from orchestrator.store.transcripts import TranscriptMirror
from orchestrator.store.turn_rows import PendingEvents, Turn, TurnInterrupted, TurnStatus


class TurnWrites:
    """TurnStore's writes of a running turn, each in one statement."""

    db: Database
    mirror: TranscriptMirror
    sessions: SessionStore

    async def accept(
        self, turn: Turn, message: dict[str, Any], load: bool = True
    ) -> list[dict[str, Any]]:
        """Appends the turn's message to its session and marks it accepted, together; returns
        the session's history before it, read in the same statement (with `load`; else [])."""
        return await self.accept_group(turn, [message], load)

    async def accept_group(
        self, turn: Turn, messages: list[dict[str, Any]], load: bool = True
    ) -> list[dict[str, Any]]:
        """`accept` for several messages (a client's tool results, then its message)."""
        history = await self.sessions.append_fenced(
            Fence(turn.id, accept=True), turn.session_id, messages, load=load
        )
        if history is None:
            await self._refused(turn)
        turn.accepted = True
        return history or []

    async def append_turn(self, turn: Turn, messages: list[dict[str, Any]]) -> None:
        """Appends a message group of the running turn to its session (fenced). The turn's
        answer (a lone assistant message without tool calls) is held and written with the
        outcome, in the statement that records it; one held before goes first."""
        if not messages:
            return
        if len(messages) == 1 and is_answer(messages[0]):
            turn.held_answer.extend(messages)
            return
        group, turn.held_answer = [*turn.held_answer, *messages], []
        fenced = await self.sessions.append_fenced(Fence(turn.id), turn.session_id, group)
        if fenced is None:
            await self._refused(turn)

    async def _refused(self, turn: Turn) -> None:
        """Raises TurnInterrupted: the turn no longer runs (its write was fenced off)."""
        async with self.db.connection() as conn:
            cursor = await conn.execute("SELECT status FROM tasks WHERE id = %s", (turn.id,))
            _running_or_raise(await cursor.fetchone())
        raise TurnInterrupted("the task's write was refused")  # it ran again meanwhile

    async def finish(
        self,
        turn: Turn,
        status: TurnStatus,
        event: str,
        summary: dict[str, Any],
        only_from: tuple[TurnStatus, ...] = ("queued", "running"),
        numbered: PendingEvents | None = None,
    ) -> bool:
        """Ends the turn (if it is in one of `only_from`) with the messages its turn held (its
        answer) and its terminal event, durably; False if it was not. Of a turn running here,
        `numbered` has the events its outbox still held and the terminal event's seq (else it
        follows the turn's last)."""
        now = time.time()
        terminal = StoredEvent(
            0, 0, turn.id, event, {"session_id": turn.session_id, **summary}, now
        )
        events = [*(numbered.pending if numbered else []), terminal]
        held = RecordsToAppend(
            turn.session_id,
            [("message", m) for m in turn.held_answer],
            self.mirror.import_mark(turn.session_id),
        ).params()
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT crayfish_finish(%s, %b::text[], %s, %s, %s, %s, %s, %s,"
                " %b::integer[], %b::text[], %b::json[], %b::float8[],"
                " %s, %s, %b::text[], %b::json[], %s) AS ended",
                (
                    turn.id,
                    list(only_from),
                    status,
                    pg_text(turn.result),
                    pg_text(turn.error),
                    turn.delivered,
                    Jsonb(turn.usage),
                    now,
                    [*(e.seq for e in numbered.pending), numbered.terminal_seq]
                    if numbered
                    else None,
                    [e.type for e in events],
                    [Json(e.data) for e in events],
                    [e.ts for e in events],
                    held["title"],
                    held["delta"],
                    held["kinds"],
                    held["bodies"],
                    held["imported"],
                ),
            )
            row = await cursor.fetchone()
        if not row or not row["ended"]:
            return False
        if turn.held_answer:
            self.mirror.record(turn.session_id, turn.held_answer)
            turn.held_answer = []
        turn.status, turn.finished_at = status, now
        return True

    async def record_failure(self, turn: Turn) -> None:
        """Keeps what made a running turn fail, before its outcome is recorded."""
        async with self.db.connection() as conn:
            await conn.execute(
                "UPDATE tasks SET failure = %s WHERE id = %s AND status = 'running'",
                (Jsonb(turn.failure), turn.id),
            )


def is_answer(message: dict[str, Any]) -> bool:
    """A turn's final answer: an assistant message that calls no tool."""
    return message.get("role") == "assistant" and not message.get("tool_calls")


def _running_or_raise(row: dict[str, Any] | None) -> None:
    """Fences a turn's writes: they go on only while its turn is running (not ended or taken
    over elsewhere); the caller's transaction holds the turn's row."""
    if row is None or row["status"] != "running":
        status = row["status"] if row else "gone"
        raise TurnInterrupted(f"the task is {status}: its turn no longer writes to the session")
