"""The turn manager: each turn waits in its session's line in the store, run by whichever
replica claims it (at once by the replica that accepted it, when the session is idle), with
status, result and events that every replica reads from the store. How runs end: outcomes.py;
the turns of dead replicas: stalled.py; waits and follows: following.py."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
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
    TurnInterrupted,
    TurnStore,
)
from orchestrator.store.transcripts import TranscriptMirror
from orchestrator.store.turn_requests import Earlier, TurnRequest, TurnRequests
from orchestrator.store.turns import Turn
from orchestrator.turns.events import EventOutbox, EventSink, LiveLog, LiveTurn, Watches
from orchestrator.turns.following import TurnFollowing
from orchestrator.turns.outcomes import INTERRUPTED, ORPHANED, EventObserver
from orchestrator.turns.stalled import StalledTurns
from orchestrator.turns.turn_failure import TurnFailure, failure_of
from orchestrator.turns.turn_worker import TurnWorker, WorkerTiming

log = logging.getLogger(__name__)
tracer = trace.get_tracer("crayfish.orchestrator")

# what callers took from this module before the split
__all__ = ["INTERRUPTED", "ORPHANED", "EventObserver", "RunTurn", "Turn", "TurnManager"]

RunTurn = Callable[[Turn, EventSink], Awaitable[str]]


class TurnManager(StalledTurns, TurnFollowing):
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
            # Its runner hears, or reads the mark when it next marks itself alive.
            await self.store.request_cancel(turn.id)
        return await self.wait(turn.id, wait)

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
