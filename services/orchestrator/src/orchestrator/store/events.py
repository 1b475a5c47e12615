"""Turn events in PostgreSQL, and the LISTEN connection that wakes this replica's readers and
tells its turn worker of turns waiting in line and of cancels.

Any replica serves any stream: a reader reads what is stored after the id it has, then sleeps
until a NOTIFY names its turn (or, for the global stream, any turn), with a slow poll in case
the listening connection was down when a notification went out. (A turn running on this
replica is followed from memory instead: turns/manager.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Json

from orchestrator.store.database import Database

log = logging.getLogger(__name__)

CHANNEL = "crayfish_events"
POLL_SECONDS = 2.0  # a reader's longest sleep without a notification
# Payload prefixes of notifications that are not a turn's events: a turn ended (its waiters
# read its row, not events), a turn waits in line (claimers look), a running turn's cancel was
# asked (its runner stops it).
ENDED = "!"
QUEUED = "?"
CANCEL = "#"
# ...and a channel (OWED + its name) is owed a new reply or message: its long poll answers.
OWED = "@"
# ...and a reader follows a turn's events from the store (WATCH + its id; WATCH_ALL: every
# turn's): the turn's runner writes them while it runs, not only with its outcome (events.py).
WATCH = "+"
WATCH_ALL = "*"
WATCH_RENEW = 2.0  # a reader following from the store announces its watch again this often
WATCH_TTL = 6.0  # a watch lasts this long after its last announcement
BATCH = 500
PRUNE_BATCH = 5_000


@dataclass
class StoredEvent:
    id: int  # global, increasing
    seq: int  # within its turn: 1, 2, ...
    task_id: str
    type: str
    data: dict[str, Any]
    ts: float


class EventStore:
    """Appends events and follows them, for one turn or all."""

    def __init__(self, db: Database):
        self.db = db
        self._readers: dict[str | None, set[asyncio.Event]] = {}
        self._listener: asyncio.Task[None] | None = None
        # Told of QUEUED and CANCEL notifications (and of a reconnect, with None: anything may
        # have been missed): the replica's turn worker.
        self.on_queued: Callable[[], None] = lambda: None
        self.on_cancel: Callable[[str | None], None] = lambda task_id: None
        # Told of WATCH notifications: the turn a reader follows (None: every turn).
        self.on_watch: Callable[[str | None], None] = lambda task_id: None

    async def add(self, task_id: str, type_: str, data: dict[str, Any]) -> StoredEvent:
        """Appends one event (not waiting for the disk: a progress report)."""
        ts = time.time()
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT id, seq FROM crayfish_add_event(%s, %s, %s, %s, false)",
                (task_id, type_, Json(data), ts),
            )
            row = await cursor.fetchone()
        assert row is not None
        return StoredEvent(row["id"], row["seq"], task_id, type_, data, ts)

    async def add_numbered(self, task_id: str, events: list[StoredEvent]) -> None:
        """Appends a running turn's events, numbered by its runner, in one statement (not
        waiting for the disk: the outcome's write, durable, comes after them)."""
        async with self.db.connection() as conn:
            await conn.execute(
                # Arrays as binary parameters: text ones are escaped element by element.
                "SELECT crayfish_put_events(%s, %b::integer[], %b::text[], %b::json[],"
                " %b::float8[], false)",
                (
                    task_id,
                    [e.seq for e in events],
                    [e.type for e in events],
                    [Json(e.data) for e in events],
                    [e.ts for e in events],
                ),
            )

    async def last_seqs(self, task_ids: list[str]) -> dict[str, int]:
        """The seq of each turn's last event (0 when it has none)."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT task_id, max(seq) AS seq FROM events WHERE task_id = ANY(%s)"
                " GROUP BY task_id",
                (task_ids,),
            )
            found = {row["task_id"]: row["seq"] for row in await cursor.fetchall()}
        return {task_id: found.get(task_id, 0) for task_id in task_ids}

    async def task_events(self, task_id: str, after_seq: int) -> list[StoredEvent]:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT id, seq, task_id, type, data, ts FROM events"
                " WHERE task_id = %s AND seq > %s ORDER BY seq LIMIT %s",
                (task_id, after_seq, BATCH),
            )
            return [StoredEvent(**row) for row in await cursor.fetchall()]

    async def all_events(self, after_id: int) -> list[StoredEvent]:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT id, seq, task_id, type, data, ts FROM events"
                " WHERE id > %s ORDER BY id LIMIT %s",
                (after_id, BATCH),
            )
            return [StoredEvent(**row) for row in await cursor.fetchall()]

    async def prune(self, finished_before: float) -> int:
        """Deletes the events of tasks that ended before `finished_before` (epoch seconds),
        keeping each one's last (terminal) event, so its stream still answers and ends; returns
        how many went. In batches, so no transaction holds many rows."""
        removed = 0
        while True:
            async with self.db.connection() as conn:
                cursor = await conn.execute(
                    "DELETE FROM events WHERE id IN ("
                    " SELECT e.id FROM events e JOIN tasks t ON t.id = e.task_id"
                    " WHERE t.finished_at < %s"
                    " AND e.seq < (SELECT max(l.seq) FROM events l WHERE l.task_id = e.task_id)"
                    " LIMIT %s)",
                    (finished_before, PRUNE_BATCH),
                )
                removed += cursor.rowcount
            if cursor.rowcount < PRUNE_BATCH:
                return removed

    async def last_id(self) -> int:
        async with self.db.connection() as conn:
            row = await (await conn.execute("SELECT max(id) AS id FROM events")).fetchone()
            return int(row["id"] or 0) if row else 0

    async def follow_task(
        self,
        task_id: str,
        after_seq: int,
        terminal: set[str],
        until: Callable[[int], bool] = lambda seq: False,
    ) -> AsyncIterator[StoredEvent]:
        """The turn's events after `after_seq`, live, ending with its terminal event, or
        earlier once `until(last seq yielded)` holds (checked before each sleep)."""
        watch = _Watch(self, task_id)
        async with self._woken_by(task_id) as woken:
            while True:
                woken.clear()  # before reading: a notification during the read is not lost
                fresh = await self.task_events(task_id, after_seq)
                for event in fresh:
                    after_seq = event.seq
                    yield event
                    if event.type in terminal:
                        return
                if len(fresh) < BATCH:
                    if until(after_seq):
                        return
                    await watch.renew()
                    await sleep_until(woken)

    async def follow_all(self, after_id: int) -> AsyncIterator[StoredEvent]:
        """Every turn's events after `after_id`, live, until the reader leaves."""
        watch = _Watch(self, None)
        async with self._woken_by(None) as woken:
            while True:
                woken.clear()
                fresh = await self.all_events(after_id)
                for event in fresh:
                    after_id = event.id
                    yield event
                if len(fresh) < BATCH:
                    await watch.renew()
                    await sleep_until(woken)

    async def announce_watch(self, task_id: str | None) -> None:
        """Tells every replica a reader follows `task_id`'s events (None: every turn's) from
        the store, so the runner writes them as the turn goes (WATCH)."""
        payload = WATCH + (WATCH_ALL if task_id is None else task_id)
        async with self.db.connection() as conn:
            await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))

    def woken_at_end(self, task_id: str) -> contextlib.AbstractAsyncContextManager[asyncio.Event]:
        """An event set when the turn ends (TurnStore.finish notifies ENDED + its id), at least
        every POLL_SECONDS through `sleep_until`, and when the listener reconnects."""
        return self._woken_by(ENDED + task_id)

    def woken_when_owed(
        self, channel: str
    ) -> contextlib.AbstractAsyncContextManager[asyncio.Event]:
        """An event set when the channel is owed a new reply or message (store/channels.py
        notifies OWED + its name), and when the listener reconnects."""
        return self._woken_by(OWED + channel)

    @contextlib.asynccontextmanager
    async def _woken_by(self, task_id: str | None) -> AsyncIterator[asyncio.Event]:
        """An event set by each notification about `task_id` (None: about any turn)."""
        woken = asyncio.Event()
        self._readers.setdefault(task_id, set()).add(woken)
        try:
            yield woken
        finally:
            readers = self._readers[task_id]
            readers.discard(woken)
            if not readers:
                del self._readers[task_id]

    def _wake(self, task_id: str | None) -> None:
        """Wakes the readers of `task_id` and of every turn (all readers when None)."""
        if task_id is None:
            groups = list(self._readers.values())
            self.on_queued()
            self.on_cancel(None)
        elif task_id.startswith(QUEUED):
            self.on_queued()
            return
        elif task_id.startswith(CANCEL):
            self.on_cancel(task_id[len(CANCEL) :])
            return
        elif task_id.startswith(WATCH):
            watched = task_id[len(WATCH) :]
            self.on_watch(None if watched == WATCH_ALL else watched)
            return
        elif task_id.startswith((ENDED, OWED)):  # only its waiters (a turn's events: notified)
            groups = [self._readers.get(task_id, set())]
        else:
            groups = [self._readers.get(task_id, set()), self._readers.get(None, set())]
        for group in groups:
            for woken in group:
                woken.set()

    def start_listening(self) -> None:
        self._listener = asyncio.create_task(self._listen(), name="event-listener")

    async def stop_listening(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener

    async def _listen(self) -> None:
        """One LISTEN connection for the replica, reopened when it drops."""
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.db.url, autocommit=True
                ) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self._wake(None)  # anything sent while it was down is read now
                    async for note in conn.notifies():
                        self._wake(note.payload)
            except psycopg.OperationalError as exc:
                log.warning("event listener lost its connection (%s); reconnecting", exc)
                await asyncio.sleep(1.0)


class _Watch:
    """A reader's watch: announced when it first waits for more, then every WATCH_RENEW."""

    def __init__(self, events: EventStore, task_id: str | None):
        self.events = events
        self.task_id = task_id
        self._announced = -WATCH_RENEW

    async def renew(self) -> None:
        now = time.monotonic()
        if now - self._announced >= WATCH_RENEW:
            self._announced = now
            await self.events.announce_watch(self.task_id)


async def sleep_until(woken: asyncio.Event, longest: float = POLL_SECONDS) -> None:
    """Returns when woken, or after `longest` seconds (at most POLL_SECONDS)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(woken.wait(), min(longest, POLL_SECONDS))
