"""The turn manager: each turn waits in its session's line in the store, run by whichever
replica claims it (at once by the replica that accepted it, when the session is idle), with
status, result and events that every replica reads from the store."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from crayfish_common.tracing import attach_carrier, current_carrier, detach, span
from opentelemetry import trace

from orchestrator.agent.llm import LLMError
from orchestrator.notify.delivery_queue import Deliveries, DeliveryQueue
from orchestrator.store import (
    Database,
    EventStore,
    SessionStore,
    StoredEvent,
    StoreUnavailable,
    TurnInterrupted,
    TurnStore,
)
from orchestrator.store.events import POLL_SECONDS, sleep_until
from orchestrator.store.locks import SWEEP_LOCK
from orchestrator.store.transcripts import TranscriptMirror
from orchestrator.store.turn_requests import Earlier, TurnRequest, TurnRequests
from orchestrator.store.turns import TERMINAL_STATUSES, PendingEvents, Turn, TurnStatus
from orchestrator.turns.events import TERMINAL_EVENTS, EventOutbox, EventSink, LiveLog, Watches
from orchestrator.turns.turn_failure import TurnFailure, failure_of
from orchestrator.turns.turn_worker import TurnWorker, WorkerTiming

log = logging.getLogger(__name__)
tracer = trace.get_tracer("crayfish.orchestrator")

RunTurn = Callable[[Turn, EventSink], Awaitable[str]]
# Sees every event this replica publishes (metrics): observer(event type, data).
EventObserver = Callable[[str, dict[str, Any]], None]
INTERRUPTED = (
    "the turn was interrupted: the orchestrator running it stopped (a crash or a shutdown). "
    "Tools it had started may have run; nothing was retried. Ask again to go on."
)
ORPHANED = (
    "the turn was interrupted: its run ended without its outcome being recorded (the database "
    "was unavailable). Tools it had started may have run; nothing was retried. Ask again to go on."
)
# A turn's outcome the store could not take is tried again after 0.5 s, 1 s, ... at most 5 s
# apart, until it does: the turn holds its session until then (the store has no other record).
OUTCOME_RETRY_FIRST = 0.5
OUTCOME_RETRY_MAX = 5.0
GLOBAL_RESUME_WINDOW = 10_000  # a new reader of /api/events starts this many events back


@dataclass
class LiveTurn:
    """A turn running on this replica (its outcome once recorded), its events for
    followers here, and an event set when its run is over."""

    turn: Turn
    log: LiveLog
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    tools_started: int = 0


class TurnManager:
    """Creates turns, runs those this replica starts or claims, cancels any, and ends the turns
    of replicas that died."""

    def __init__(
        self,
        db: Database,
        run_turn: RunTurn,
        timing: WorkerTiming,
        name: str,
        mirror: TranscriptMirror | None = None,
        deliveries: Deliveries | None = None,
        sessions: SessionStore | None = None,
    ):
        self.db = db
        self.run_turn = run_turn
        self.timing = timing
        self.name = name
        self.events = EventStore(db)
        self.store = TurnStore(db, self.events, mirror, sessions)
        self.requests = TurnRequests(db)  # the requests that started turns, for their retries
        self.delivery_queue = DeliveryQueue(db, timing, deliveries)  # notification deliveries
        self.worker = TurnWorker(
            self.store, self._run_here, timing, name, self._gone, self._end_orphan
        )
        self.events.on_queued = self.worker.queued
        self.events.on_cancel = self.worker.cancel_told
        self.events.on_watch = self._watch_told
        self.watches = Watches()  # readers following events from the store, on any replica
        self.observers: list[EventObserver] = []
        self.active_count = 0  # queued or running, cluster-wide, as of the last sweep
        self._outboxes: dict[str, EventOutbox] = {}  # of the turns running here
        self._live: dict[str, LiveTurn] = {}  # the turns running here
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.events.start_listening()
        await self.delivery_queue.open()
        await self.sweep()
        await self.worker.start()
        self.delivery_queue.start_worker(self.name)
        self._sweeper = asyncio.create_task(self._sweep_loop(), name="stalled-turns")

    async def create(
        self,
        session_id: str,
        message: str,
        kind: str = "chat",
        task_id: str | None = None,
        images: list[dict[str, Any]] | None = None,
    ) -> Turn:
        """Records the turn durably (the acknowledgement) and, when its session is idle and
        this replica has room, starts it here at once; else it waits in its session's line. A
        turn id that exists already is left as it is (nothing more is queued)."""
        turn = Turn(task_id or uuid.uuid4().hex, session_id, message, kind, images=images or [])
        turn.trace = current_carrier() or None  # the turn's spans join the request's trace
        # Shielded: a caller cancelled mid-submit must not leave a turn the submit started here
        # without its run (it would hold its session while this replica lives).
        await asyncio.shield(self._submit(turn))
        return turn

    async def create_once(
        self,
        request: TurnRequest,
        session_id: str,
        message: str,
        images: list[dict[str, Any]] | None = None,
        kind: str = "chat",
        task_id: str | None = None,
    ) -> Turn | Earlier:
        """`create` of a turn for a request a client may repeat: the new turn, or, when
        the request repeats an earlier one (store/turn_requests.py), that one (nothing new is
        queued). Two attempts arriving together, on any replicas, start one turn."""
        turn = Turn(task_id or uuid.uuid4().hex, session_id, message, kind, images=images or [])
        turn.trace = current_carrier() or None
        earlier = await asyncio.shield(self._submit(turn, request))
        return turn if earlier is None else earlier

    async def _submit(self, turn: Turn, request: TurnRequest | None = None) -> Earlier | None:
        session_id, kind = turn.session_id, turn.kind
        earlier = None
        here = self.worker.reserve()
        here = await self.worker.keep_if_idlest(here)  # turns spread over idle replicas
        try:
            runner = self.name if here else None
            if request is None:
                created = await self.store.submit(turn, runner)
            else:
                earlier = await self.requests.submit(turn, runner, request)
                created = earlier is None
            if created and turn.status == "running":
                self._start_here(turn)
        finally:
            if here:
                self.worker.release()
        if created:
            self._observe("task.queued", {"session_id": session_id, "kind": kind})
            if turn.status == "running":
                self._observe("task.started", {"session_id": session_id, "kind": kind})
        return earlier

    def _start_here(self, turn: Turn) -> None:
        """Runs a turn its submit started here; its first two events (task.queued and
        task.started, written by the submit) are in its live log already."""
        data = {"session_id": turn.session_id, "kind": turn.kind}
        started = turn.started_at or turn.created_at
        shown = [
            StoredEvent(0, 1, turn.id, "task.queued", data, turn.created_at),
            StoredEvent(0, 2, turn.id, "task.started", data, started),
        ]
        self._live[turn.id] = LiveTurn(turn, LiveLog(turn.id, 2, shown))
        self.worker.run(turn, 2)

    async def get(self, task_id: str) -> Turn | None:
        return await self.store.get(task_id)

    async def active(self, session_id: str | None = None, kind: str | None = None) -> list[Turn]:
        return await self.store.active(session_id, kind)

    def running_here(self, session_id: str) -> Turn | None:
        """The session's turn if it runs on this replica."""
        found = (live.turn for live in self._live.values() if live.turn.session_id == session_id)
        return next(found, None)

    async def cancel(self, turn: Turn, wait: float = 10.0) -> Turn:
        """Stops a queued or running turn, wherever it runs; returns it as it then is."""
        if not self.worker.cancel_here(turn.id):
            turn.error = "cancelled by request"
            if await self._finish(turn, "cancelled", only_from=("queued",)):
                return turn
            await self.store.request_cancel(turn.id)  # its runner hears, or reads it at a beat
        return await self.wait(turn.id, wait)

    async def wait(self, task_id: str, within: float | None = None) -> Turn:
        """The turn once it has ended (or as it is after `within` seconds). A turn running here
        is awaited in memory; any other, by reading its row when told it ended."""
        live = self._live.get(task_id)
        if live is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(within):
                    await live.ended.wait()
            if live.turn.done:  # its outcome is stored (else it was taken over: read the row)
                return live.turn
        loop = asyncio.get_running_loop()
        deadline = None if within is None else loop.time() + within
        async with self.events.woken_at_end(task_id) as told:
            while True:
                told.clear()  # before reading: an end told during the read is not lost
                turn = await self.store.get(task_id)
                assert turn is not None
                left = POLL_SECONDS if deadline is None else deadline - loop.time()
                if turn.status in TERMINAL_STATUSES or left <= 0:
                    return turn
                await sleep_until(told, left)

    async def follow(self, task_id: str, after_seq: int) -> AsyncIterator[StoredEvent]:
        """The turn's events after `after_seq`, live, up to its terminal event: from memory
        while it runs on this replica, else from the store."""

        def here(seq: int) -> bool:
            live = self._live.get(task_id)
            return live is not None and live.log.has_all_after(seq)

        while True:
            live = self._live.get(task_id)
            if live is not None and live.log.has_all_after(after_seq):
                async for event in live.log.after(after_seq):
                    after_seq = event.seq
                    yield event
                    if event.type in TERMINAL_EVENTS:
                        return
                # Its run here ended without its terminal event (it was taken over): that event
                # is in the store, numbered after what the store had, maybe before what was shown.
                since = min(after_seq, live.log.written_seq)
                async for event in self.events.follow_task(task_id, since, TERMINAL_EVENTS):
                    if event.seq > after_seq or event.type in TERMINAL_EVENTS:
                        yield event
                return
            async for event in self.events.follow_task(
                task_id, after_seq, TERMINAL_EVENTS, until=here
            ):
                after_seq = event.seq
                yield event
                if event.type in TERMINAL_EVENTS:
                    return

    async def follow_all(self, after_id: int | None) -> AsyncIterator[StoredEvent]:
        """Every turn's events after `after_id` (None: the last GLOBAL_RESUME_WINDOW), live."""
        if after_id is None:
            after_id = max(0, await self.events.last_id() - GLOBAL_RESUME_WINDOW)
        async for event in self.events.follow_all(after_id):
            yield event

    async def publish(self, turn: Turn, type_: str, data: dict[str, Any]) -> None:
        """Records an event of a turn running here (its own stream and the global one),
        through its EventOutbox: numbered, shown and written in the background, in order."""
        data = {"session_id": turn.session_id, **data}
        self._observe(type_, data)
        live = self._live.get(turn.id)
        if type_ == "tool.started" and live is not None:
            live.tools_started += 1
        outbox = self._outboxes.get(turn.id)
        if outbox is None:
            raise TurnInterrupted(f"task {turn.id} does not run on this replica")
        await outbox.add(type_, data)

    async def shutdown(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        await self.worker.close()
        await self.delivery_queue.close()
        await self.events.stop_listening()

    async def _run_here(
        self, turn: Turn, last_seq: int, cancelled_by_user: Callable[[], bool]
    ) -> None:
        """Runs a turn started on this replica to its end, and records how it ended."""
        live = self._live.setdefault(turn.id, LiveTurn(turn, LiveLog(turn.id, last_seq)))
        token = attach_carrier(turn.trace)
        try:
            self._outboxes[turn.id] = EventOutbox(
                live.log,
                lambda batch: self.events.add_numbered(turn.id, batch),
                watched=lambda: self.watches.watched(turn.id),
            )
            attributes = {"crayfish.task_id": turn.id, "crayfish.session_id": turn.session_id}
            with span(tracer, f"turn {turn.kind}", attributes):
                turn.result = await self.run_turn(turn, lambda t, d: self.publish(turn, t, d))
            await self._finish(turn, "completed", live=live)
        except asyncio.CancelledError:
            await self._stopped(cancelled_by_user(), live)
            raise
        except TurnInterrupted as exc:  # declared dead elsewhere: it writes nothing more
            log.warning("task %s stopped: %s", turn.id, exc)
        except Exception as exc:  # the turn fails; the server goes on
            if isinstance(exc, LLMError):  # expected (the provider's error, a timeout): one line
                log.warning("task %s failed: %s", turn.id, exc)
            else:
                log.exception("task %s failed", turn.id)
            turn.error = str(exc) or type(exc).__name__
            await self._record_failure(turn, failure_of(exc, live.tools_started))
            await self._finish(turn, "failed", live=live)
        finally:
            outbox = self._outboxes.pop(turn.id, None)
            if outbox is not None:
                outbox.abandon()
            self._gone(turn)
            detach(token)

    async def _record_failure(self, turn: Turn, failure: TurnFailure) -> None:
        """Keeps what made the turn fail, for the answers to its clients; without it they
        still get its error."""
        turn.failure = failure.as_json()
        try:
            await self.store.record_failure(turn)
        except Exception:  # its outcome is what matters: recording that goes on
            log.exception("task %s: recording what made it fail failed", turn.id)

    def _gone(self, turn: Turn) -> None:
        """Its run here is over: its followers and waiters here are told (a waiter then reads
        the row, if the run recorded no outcome, e.g. one stopped before it began: the sweep of
        another replica puts that back in line)."""
        live = self._live.pop(turn.id, None)
        self.watches.forget(turn.id)
        if live is not None:
            live.log.close()
            live.ended.set()

    def _watch_told(self, task_id: str | None) -> None:
        """A reader follows `task_id`'s events (None: every turn's) from the store: the turns
        concerned running here write theirs as they go."""
        self.watches.renew(task_id)
        if task_id is None:
            for outbox in self._outboxes.values():
                outbox.wake()
        elif task_id in self._outboxes:
            self._outboxes[task_id].wake()

    async def _stopped(self, by_user: bool, live: LiveTurn) -> None:
        """A turn stopped by a cancel (-> cancelled) or by this replica shutting down: a turn
        that had begun is interrupted; one that had not goes back in line for any replica."""
        turn = live.turn
        if not by_user and not turn.accepted and await self.store.requeue(turn.id):
            return
        turn.error = "cancelled by request" if by_user else INTERRUPTED
        await self._finish(turn, "cancelled" if by_user else "interrupted", live=live)

    async def _finish(
        self,
        turn: Turn,
        status: TurnStatus,
        only_from: tuple[TurnStatus, ...] = ("queued", "running"),
        live: LiveTurn | None = None,
    ) -> bool:
        """Records the turn's outcome; of a turn running here (`live`), with the events its
        outbox still holds, in the same statement, until the store takes it. False if it had
        ended (or, with `only_from`, was in another state)."""
        summary: dict[str, Any] | None
        if live is None:
            summary = self._summary(turn, status)
            if not await self.store.finish(turn, status, f"task.{status}", summary, only_from):
                summary = None
        else:
            self.worker.ending(turn.id)
            outbox = self._outboxes.pop(turn.id, None)
            pending = await outbox.drain() if outbox is not None else []
            numbered = PendingEvents(pending, live.log.next_seq)
            summary = await self._record_outcome(turn, status, only_from, numbered)
        if summary is not None:
            data = {"session_id": turn.session_id, **summary}
            if live is not None:
                live.log.append(f"task.{turn.status}", data, turn.finished_at or time.time())
                live.log.written_seq = live.log.next_seq - 1
            self._observe(f"task.{turn.status}", data)
        return summary is not None

    async def _record_outcome(
        self,
        turn: Turn,
        status: TurnStatus,
        only_from: tuple[TurnStatus, ...],
        numbered: PendingEvents,
    ) -> dict[str, Any] | None:
        """Records a turn's outcome, trying again while the store is unavailable (it is then
        ended once the store is back, not left running); returns its summary (None: it had
        ended). An outcome the store refuses (a full disk) becomes the failure alone. Not while
        the replica stops: its turns are then ended by the sweep (its heartbeat stops)."""
        wait, refused = OUTCOME_RETRY_FIRST, False
        while True:
            summary = self._summary(turn, status)
            try:
                event = f"task.{status}"
                if await self.store.finish(turn, status, event, summary, only_from, numbered):
                    return summary
                return None
            except Exception as exc:
                if self.worker.closing:
                    raise
                if not refused and not isinstance(exc, StoreUnavailable):
                    log.exception("task %s: recording its outcome failed", turn.id)
                    # Just the failure this time (a full disk may still take that much): the
                    # answer and the events not yet written are dropped (followers here have
                    # seen them).
                    refused, status, turn.result, turn.held_answer = True, "failed", None, []
                    turn.error = f"its outcome could not be saved: {exc}"
                    numbered = PendingEvents([], numbered.terminal_seq)
                    continue
                log.warning(
                    "task %s: recording its outcome failed (%s); trying again in %.1f s",
                    turn.id,
                    exc,
                    wait,
                )
            await asyncio.sleep(wait)
            wait = min(wait * 2, OUTCOME_RETRY_MAX)

    def _observe(self, type_: str, data: dict[str, Any]) -> None:
        for observe in self.observers:
            observe(type_, data)

    async def _end_orphan(self, task_id: str, cancel_asked: bool) -> None:
        """Ends a turn recorded as running here that no run here holds (its run ended without
        recording its outcome): cancelled if that was asked, else interrupted, or put back in
        line if it had not begun."""
        turn = await self.store.get(task_id)
        if turn is None or turn.status != "running" or task_id in self._live:
            return
        if cancel_asked:
            status: TurnStatus = "cancelled"
            turn.error = "cancelled by request"
        elif not turn.accepted and await self.store.requeue(task_id):
            log.warning("turn %s had no run here and had not begun: queued again", task_id)
            return
        else:
            status, turn.error = "interrupted", ORPHANED
        if await self._finish(turn, status, only_from=("running",)):
            log.warning(
                "turn %s had no run here (its outcome was never recorded): %s", task_id, status
            )

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(self.timing.heartbeat)
            try:
                await self.sweep()
            except Exception:  # the database may be away for a moment
                log.exception("checking for stalled turns failed")

    async def sweep(self) -> None:
        """Ends the turns of dead workers (one replica at a time): a turn that had accepted
        its message is `interrupted`; one that had not goes back to the head of its line."""
        async with self.db.connection() as conn:
            got = await (
                await conn.execute("SELECT pg_try_advisory_lock(%s) AS got", (SWEEP_LOCK,))
            ).fetchone()
            if not got or not got["got"]:
                return
            try:
                await self._sweep_stalled()
                self.active_count = await self.store.count_active()
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (SWEEP_LOCK,))

    async def _sweep_stalled(self) -> None:
        for delivery in await self.delivery_queue.stalled_deliveries():
            await self.delivery_queue.release(delivery)
            log.warning("notification delivery %s of a dead worker: queued again", delivery.id)
        for turn in await self.store.stalled(self.timing.stalled_after):
            if turn.id in self._live:
                continue  # this replica's own (its heartbeat was late): it goes on
            if not turn.accepted and await self.store.requeue(turn.id):
                log.warning("turn %s of a dead replica had not begun: queued again", turn.id)
                continue
            turn.error = INTERRUPTED
            if await self._finish(turn, "interrupted", only_from=("running",)):
                log.warning("turn %s of a dead replica: interrupted", turn.id)

    def _summary(self, turn: Turn, status: str) -> dict[str, Any]:
        elapsed = (time.time() - turn.started_at) if turn.started_at else 0.0
        return {
            "kind": turn.kind,
            "status": status,
            "result": turn.result,
            "error": turn.error,
            "delivered": turn.delivered,
            "usage": dict(turn.usage),
            "duration_ms": round(elapsed * 1000, 1),
        }
