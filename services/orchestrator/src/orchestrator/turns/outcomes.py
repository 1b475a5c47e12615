"""How a turn's run ends: its outcome recorded once (with the events its outbox still holds),
tried again while the store is away, and told to this replica's observers."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from orchestrator.store import StoreUnavailable, TurnStore
from orchestrator.store.turns import PendingEvents, Turn, TurnStatus
from orchestrator.turns.events import EventOutbox, LiveTurn
from orchestrator.turns.turn_worker import TurnWorker

log = logging.getLogger(__name__)

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


class TurnOutcomes:
    """TurnManager's recording of how turns end."""

    store: TurnStore
    worker: TurnWorker
    observers: list[EventObserver]
    _outboxes: dict[str, EventOutbox]

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
        the replica stops: its turns are then ended by the sweep (its liveness marks stop)."""
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
