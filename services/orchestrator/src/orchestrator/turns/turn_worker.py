"""This replica's share of the turns: it claims the heads of sessions' lines (told by NOTIFY, and
every few seconds in case a notification was missed), runs at most `concurrency` turns at once,
stops a turn whose cancel was asked on any replica, marks the replica alive (which also finds a turn
recorded as running here that no run here holds), and at shutdown lets running turns finish for
a grace period before stopping them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from orchestrator.store import TurnStore
from orchestrator.store.events import POLL_SECONDS
from orchestrator.store.spread import Spread
from orchestrator.store.turns import Turn

log = logging.getLogger(__name__)

# Runs one started turn: run(turn, seq of its last event, cancelled_by_user), where
# cancelled_by_user() tells, once the turn was cancelled, whether a user asked (else the replica
# is shutting down).
RunTurnHere = Callable[[Turn, int, Callable[[], bool]], Awaitable[None]]
# Ends a turn recorded as running here that no run here holds: orphaned(turn id, cancel asked).
EndOrphan = Callable[[str, bool], Awaitable[None]]


@dataclass(frozen=True)
class WorkerTiming:
    concurrency: int = 100
    alive_every: float = 2.0  # seconds between a replica's liveness marks
    stalled_after: float = 10.0  # a replica silent this long is dead, its turns stalled
    shutdown_grace: float = 3.0  # seconds a stopping replica lets running turns finish


class TurnWorker:
    def __init__(
        self,
        store: TurnStore,
        run: RunTurnHere,
        timing: WorkerTiming,
        name: str,
        gone: Callable[[Turn], None] = lambda turn: None,
        orphaned: EndOrphan | None = None,
    ):
        self.store = store
        self.run_turn = run
        self.gone = gone  # told when a run is over, even one cancelled before it began
        self.orphaned = orphaned
        self.timing = timing
        self.name = name
        self._running: dict[str, asyncio.Task[None]] = {}
        self._by_user: set[str] = set()
        self._ending: set[str] = set()  # runs over, recording their outcome
        self._orphans: set[str] = set()  # recorded as running here at the last mark, not run here
        self._reserved = 0  # slots held by submits of this replica in flight
        self._wake = asyncio.Event()
        self._full = False  # a claim was cut short for want of room: claim when a turn ends
        self._closing = False
        self._loops: list[asyncio.Task[None]] = []
        self._alone_until = 0.0  # monotonic time until which this replica counts as the only one

    async def start(self) -> None:
        """Registers the replica (before it holds any turn), then claims and marks it alive."""
        await self.store.mark_alive(self.name)
        self._wake.set()  # what waits in line already
        self._loops = [
            asyncio.create_task(self._claim_loop(), name="turn-claims"),
            asyncio.create_task(self._alive_loop(), name="turn-liveness"),
        ]

    def reserve(self) -> bool:
        """Holds a slot for a turn this replica is submitting (it may start at once); False
        when full or stopping. Release it with `release` once the submit has returned."""
        if self._closing or len(self._running) + self._reserved >= self.timing.concurrency:
            return False
        self._reserved += 1
        return True

    async def keep_if_idlest(self, reserved: bool) -> bool:
        """Keeps a slot `reserve` gave when no other live replica runs fewer turns; else frees
        it, and the turn waits in line for the idlest to claim it (turns spread whichever
        replica accepted them). Whether the slot is kept."""
        if not reserved:
            return False
        if time.monotonic() < self._alone_until:
            return True  # no other replica a liveness mark ago: no need to ask
        try:
            here, others = await self.store.starts_here(self.name, self.spread)
        except BaseException:
            self.release()
            raise
        if not others:
            self._alone_until = time.monotonic() + self.timing.alive_every
        if not here:
            self.release()
        return here

    @property
    def spread(self) -> Spread:
        """Other replicas count while their liveness mark is recent (three marks: one that
        stopped marking to shut down soon stops drawing turns it will not claim, and one whose
        mark a busy machine delayed still counts) and they have room: turns go to the idlest
        (store/spread.py)."""
        fresh = min(3 * self.timing.alive_every, self.timing.stalled_after)
        return Spread(fresh, self.timing.concurrency)

    def release(self) -> None:
        self._reserved -= 1

    def run(self, turn: Turn, last_seq: int) -> None:
        """Runs a turn started on this replica (by its submit or a claim)."""
        handle = asyncio.create_task(self._run_one(turn, last_seq), name=f"turn {turn.id}")
        # Cleans up however it ends: a turn cancelled before it began never runs _run_one.
        handle.add_done_callback(lambda _: self._over(turn))
        self._running[turn.id] = handle

    @property
    def closing(self) -> bool:
        return self._closing

    def ending(self, task_id: str) -> None:
        """The turn's run is over and its outcome is being recorded (until the store takes it):
        a cancel asked now comes too late and does not cut the recording short."""
        self._ending.add(task_id)

    def queued(self) -> None:
        """A turn waits in some line (a notification, or a reconnect): claim."""
        self._wake.set()

    def cancel_told(self, task_id: str | None) -> None:
        """A cancel of `task_id` was asked (None: the listener reconnected, and a request may
        have been missed; the next liveness mark reads them)."""
        if task_id is not None:
            self.cancel_here(task_id)

    def cancel_here(self, task_id: str) -> bool:
        """Stops the turn if it runs here, as cancelled by a user; False if it does not."""
        running = self._running.get(task_id)
        if running is None:
            return False
        if task_id in self._ending:
            return True
        self._by_user.add(task_id)
        running.cancel()
        return True

    async def _run_one(self, turn: Turn, last_seq: int) -> None:
        try:
            await self.run_turn(turn, last_seq, lambda: turn.id in self._by_user)
        except asyncio.CancelledError:
            pass  # the turn recorded how it stopped
        except Exception:
            log.exception("turn %s: its run failed", turn.id)

    def _over(self, turn: Turn) -> None:
        self._running.pop(turn.id, None)
        self._by_user.discard(turn.id)
        self._ending.discard(turn.id)
        self.gone(turn)
        if self._full:  # a slot is free, and more may wait in line
            self._wake.set()

    async def _claim_loop(self) -> None:
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), POLL_SECONDS)
            self._wake.clear()
            free = self.timing.concurrency - len(self._running) - self._reserved
            self._full = free <= 0
            if self._closing or self._full:
                continue
            try:
                claimed = await self.store.claim(self.name, free, self.spread)
            except Exception as exc:  # the database may be away for a moment
                log.warning("claiming turns failed: %s", exc)
                await asyncio.sleep(1.0)
                continue
            for turn, last_seq in claimed:
                self.run(turn, last_seq)
            self._full = len(claimed) == free

    async def _alive_loop(self) -> None:
        while True:
            await asyncio.sleep(self.timing.alive_every)
            try:
                held = await self.store.mark_alive(self.name)
                for task_id in [t for t, cancel in held.items() if cancel]:
                    self.cancel_here(task_id)
                await self._end_orphans(held)
            except Exception as exc:
                log.warning("marking the replica alive failed: %s", exc)

    async def _end_orphans(self, held: dict[str, bool]) -> None:
        """Ends the turns recorded as running here that no run here holds (a run that could not
        record its outcome, and gave up): as no other replica would (this one is alive), they
        would hold their sessions until a restart. Only those seen at two marks in a row: a
        turn claimed a moment ago is recorded before its run is."""
        orphans = {task_id for task_id in held if task_id not in self._running}
        confirmed, self._orphans = orphans & self._orphans, orphans
        if self.orphaned is None:
            return
        for task_id in confirmed:
            await self.orphaned(task_id, held[task_id])

    async def close(self) -> None:
        """Stops claiming; running turns get `shutdown_grace` seconds, then are stopped (a turn
        that had begun is interrupted, one that had not goes back in line for any replica)."""
        self._closing = True
        self._wake.set()
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        running = list(self._running.values())
        if running:
            await asyncio.wait(running, timeout=self.timing.shutdown_grace)
        left = list(self._running.values())
        for handle in left:
            handle.cancel()
        await asyncio.gather(*left, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.store.forget_runner(self.name)
