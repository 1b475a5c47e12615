"""Turns whose run is gone: those of dead replicas (swept by one replica at a time) and those
recorded as running here that no run here holds; each ends, or goes back in line if it had not
begun."""

from __future__ import annotations

import asyncio
import logging

from orchestrator.notify.delivery_queue import DeliveryQueue
from orchestrator.store import Database
from orchestrator.store.locks import SWEEP_LOCK
from orchestrator.store.turns import TurnStatus
from orchestrator.turns.events import LiveTurn
from orchestrator.turns.outcomes import INTERRUPTED, ORPHANED, TurnOutcomes
from orchestrator.turns.turn_worker import WorkerTiming

log = logging.getLogger(__name__)


class StalledTurns(TurnOutcomes):
    """TurnManager's sweep of dead replicas' turns, and of orphans here."""

    db: Database
    timing: WorkerTiming
    delivery_queue: DeliveryQueue
    active_count: int
    _live: dict[str, LiveTurn]

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
            await asyncio.sleep(self.timing.alive_every)
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
                continue  # this replica's own (its liveness mark was late): it goes on
            if not turn.accepted and await self.store.requeue(turn.id):
                log.warning("turn %s of a dead replica had not begun: queued again", turn.id)
                continue
            turn.error = INTERRUPTED
            if await self._finish(turn, "interrupted", only_from=("running",)):
                log.warning("turn %s of a dead replica: interrupted", turn.id)
