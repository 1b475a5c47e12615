"""Tasks (one chat turn each) in PostgreSQL: created, started, finished once, each transition one
statement. The tasks table is also the line turns wait in (0006_turn_line.sql): a session's
tasks run one at a time, in the order they were created, on whichever replica claims them.

A turn's writes to its session are fenced: they commit only while the turn is still `running`,
so a run that was declared dead (and whose session was freed) can never write after the next run
has begun.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from psycopg.types.json import Json, Jsonb

from orchestrator.store.database import Database
from orchestrator.store.events import CANCEL, CHANNEL, QUEUED, EventStore, StoredEvent
from orchestrator.store.sessions import Fence, RecordsToAppend, SessionStore, pg_text
from orchestrator.store.spread import ALONE, CLAIM_SHARE, IDLEST_HERE, LOADS, Spread
from orchestrator.store.transcripts import TranscriptMirror

TurnStatus = Literal["queued", "running", "completed", "failed", "cancelled", "interrupted"]
TERMINAL_STATUSES = ("completed", "failed", "cancelled", "interrupted")
COLUMNS = (
    "id, session_id, kind, message, status, result, error, delivered, usage, accepted,"
    " created_at, started_at, finished_at, images, trace, failure"
)


@dataclass(frozen=True)
class PendingEvents:
    """A running turn's events the store does not have yet (numbered by its runner), and the
    seq its terminal event takes."""

    pending: list[StoredEvent]
    terminal_seq: int


class TurnInterrupted(RuntimeError):
    """The turn is no longer running (declared interrupted or cancelled elsewhere)."""


def zero_usage() -> dict[str, int]:
    return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


@dataclass
class Turn:
    id: str
    session_id: str
    message: str
    kind: str = "chat"
    status: TurnStatus = "queued"
    result: str | None = None
    error: str | None = None
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    usage: dict[str, int] = field(default_factory=zero_usage)
    delivered: bool = True
    accepted: bool = False
    # references to the message's images in the workspace (media.py), not their bytes
    images: list[dict[str, Any]] = field(default_factory=list)
    # the W3C trace context of the request that queued it (crayfish_common.tracing)
    trace: dict[str, str] | None = None
    # what made a failed turn fail (turn_failure.TurnFailure.as_json())
    failure: dict[str, Any] | None = None
    # the turn's answer, written with its outcome (TurnStore.append_turn); never a column
    held_answer: list[dict[str, Any]] = field(default_factory=list, repr=False)
    # the model preset the turn asks (chosen when it starts, agent/presets.py); never a column
    model: str = ""

    @property
    def done(self) -> bool:
        return self.status in TERMINAL_STATUSES


class TurnStore:
    """Turn rows and the transitions a turn goes through, each in one statement."""

    def __init__(
        self,
        db: Database,
        events: EventStore,
        mirror: TranscriptMirror | None = None,
        sessions: SessionStore | None = None,
    ):
        self.db = db
        self.events = events
        self.mirror = mirror or TranscriptMirror(None)
        # The session store whose kept histories a turn's appends move on.
        self.sessions = sessions or SessionStore(db, self.mirror)

    async def submit(self, turn: Turn, runner: str | None) -> bool:
        """Records the turn and its `task.queued` event together, durably: once this returns the
        message is acknowledged. With `runner`, a turn whose session has nothing else queued or
        running starts at once on it (`turn.status` says). A turn id that exists already is
        left as it is: False."""
        now = time.time()
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT created, status FROM crayfish_submit(%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                submit_params(turn, runner, now),
            )
            row = await cursor.fetchone()
        assert row is not None
        return submitted(turn, row, now)

    async def claim(
        self, runner: str, limit: int, spread: Spread = ALONE
    ) -> list[tuple[Turn, int]]:
        """Starts up to `limit` tasks on `runner`, fewer when other replicas run fewer turns
        (`spread`): the heads of their sessions' lines, of sessions that run nothing; each with
        the seq of its last event (its `task.started`)."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"WITH {LOADS}, {CLAIM_SHARE} SELECT share.n AS share, c.* FROM share"
                " LEFT JOIN LATERAL crayfish_claim(%(me)s, share.n, %(now)s) AS c ON true",
                {**spread.params(runner), "free": limit, "now": time.time()},
            )
            rows = await cursor.fetchall()
            share = int(rows[0]["share"]) if rows else 0
            names = [name.strip() for name in COLUMNS.split(",")]
            claimed = [_task({k: row[k] for k in names}) for row in rows if row["id"] is not None]
            if 0 < share == len(claimed) < limit:
                # More may wait: every claimer weighs the replicas again (one that deferred to
                # a claim it could not see yet included), this one too.
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, QUEUED))
        if not claimed:
            return []
        seqs = await self.events.last_seqs([turn.id for turn in claimed])
        return [(turn, seqs[turn.id]) for turn in claimed]

    async def starts_here(self, runner: str, spread: Spread) -> tuple[bool, int]:
        """Whether a turn this replica accepts should start here (no other live replica with
        room runs fewer turns: store/spread.py), and how many other live replicas there are."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"WITH {LOADS} SELECT {IDLEST_HERE} AS here,"
                " (SELECT count(*) FROM loads) AS others",
                spread.params(runner),
            )
            row = await cursor.fetchone()
        assert row is not None
        return bool(row["here"]), int(row["others"])

    async def get(self, task_id: str) -> Turn | None:
        async with self.db.connection() as conn:
            cursor = await conn.execute(f"SELECT {COLUMNS} FROM tasks WHERE id = %s", (task_id,))
            row = await cursor.fetchone()
        return _task(row) if row else None

    async def active(self, session_id: str | None = None, kind: str | None = None) -> list[Turn]:
        """Queued or running tasks, oldest first (of one session or kind when given)."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {COLUMNS} FROM tasks WHERE status IN ('queued', 'running')"
                " AND (%(s)s::text IS NULL OR session_id = %(s)s)"
                " AND (%(k)s::text IS NULL OR kind = %(k)s) ORDER BY line",
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

    async def requeue(self, task_id: str) -> bool:
        """running -> queued (back at the head of its line, for any replica), for a turn that
        never accepted its message."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "UPDATE tasks SET status = 'queued', started_at = NULL, runner = NULL"
                " WHERE id = %s AND status = 'running' AND NOT accepted"
                " RETURNING pg_notify(%s, %s)",
                (task_id, CHANNEL, QUEUED),
            )
            return await cursor.fetchone() is not None

    async def request_cancel(self, task_id: str) -> str | None:
        """Marks a running turn to be stopped and tells its runner; returns the runner (None:
        the turn is not running)."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "UPDATE tasks SET cancel_requested = true WHERE id = %s AND status = 'running'"
                " RETURNING runner, pg_notify(%s, %s || id)",
                (task_id, CHANNEL, CANCEL),
            )
            row = await cursor.fetchone()
        return row["runner"] if row else None

    async def beat(self, runner: str) -> dict[str, bool]:
        """The runner's heartbeat; returns the tasks running on it, each with whether its
        cancel was asked."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "WITH beat AS (INSERT INTO runners (name, seen_at) VALUES (%(r)s, crayfish_now())"
                " ON CONFLICT (name) DO UPDATE SET seen_at = excluded.seen_at)"
                " SELECT id, cancel_requested FROM tasks"
                " WHERE runner = %(r)s AND status = 'running'",
                {"r": runner},
            )
            return {row["id"]: row["cancel_requested"] for row in await cursor.fetchall()}

    async def forget_runner(self, runner: str) -> None:
        async with self.db.connection() as conn:
            await conn.execute("DELETE FROM runners WHERE name = %s", (runner,))

    async def stalled(self, silent_for: float) -> list[Turn]:
        """Running tasks whose runner sent no heartbeat for `silent_for` seconds (or none);
        forgets such runners."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "WITH gone AS (DELETE FROM runners WHERE seen_at < crayfish_now() - %(s)s)"
                f" SELECT {COLUMNS} FROM tasks t WHERE status = 'running' AND NOT EXISTS ("
                " SELECT 1 FROM runners r"
                " WHERE r.name = t.runner AND r.seen_at >= crayfish_now() - %(s)s)",
                {"s": silent_for},
            )
            return [_task(row) for row in await cursor.fetchall()]


def submit_params(turn: Turn, runner: str | None, now: float) -> tuple[Any, ...]:
    """crayfish_submit's arguments for a turn."""
    return (
        turn.id,
        turn.session_id,
        turn.kind,
        pg_text(turn.message),
        turn.created_at,
        Json(turn.images),
        runner,
        now,
        Json(turn.trace) if turn.trace else None,
    )


def submitted(turn: Turn, row: dict[str, Any], now: float) -> bool:
    """Takes in what crayfish_submit said of a turn; whether it created it."""
    if row["created"]:
        turn.status = row["status"]
        turn.started_at = now if turn.status == "running" else None
    return bool(row["created"])


def is_answer(message: dict[str, Any]) -> bool:
    """A turn's final answer: an assistant message that calls no tool."""
    return message.get("role") == "assistant" and not message.get("tool_calls")


def _running_or_raise(row: dict[str, Any] | None) -> None:
    """Fences a turn's writes: they go on only while its turn is running (not ended or taken
    over elsewhere); the caller's transaction holds the turn's row."""
    if row is None or row["status"] != "running":
        status = row["status"] if row else "gone"
        raise TurnInterrupted(f"the task is {status}: its turn no longer writes to the session")


def _task(row: dict[str, Any]) -> Turn:
    return Turn(**row)
