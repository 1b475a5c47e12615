"""Notification deliveries as jobs of a PostgreSQL queue (procrastinate): sent by any replica's
worker, retried with backoff, and sent again when the worker that had one died. (Turns wait in
their sessions' lines in the tasks table: turns/turn_worker.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from procrastinate import App, PsycopgConnector, exceptions
from procrastinate.jobs import Job
from procrastinate.retry import BaseRetryStrategy, RetryDecision
from procrastinate.worker import Worker

from orchestrator.store.database import Database
from orchestrator.turns.turn_worker import WorkerTiming

log = logging.getLogger(__name__)

DELIVERY_QUEUE = "notify"
DELIVERY_TASK = "crayfish.notify"


@dataclass(frozen=True)
class Deliveries:
    """Jobs that deliver notifications: run(job arguments); an exception of `retry_on` is tried
    again after first_wait, 2 x first_wait, 4 x ... seconds, `attempts` tries in all."""

    run: Callable[[dict[str, Any]], Awaitable[None]]
    retry_on: type[Exception]
    attempts: int = 5
    first_wait: float = 2.0


class Backoff(BaseRetryStrategy):
    """Exponential backoff with a fractional first wait (procrastinate's own takes integers)."""

    def __init__(self, deliveries: Deliveries):
        self.deliveries = deliveries

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        spec = self.deliveries
        if not isinstance(exception, spec.retry_on) or job.attempts + 1 >= spec.attempts:
            return None
        return RetryDecision(retry_in={"seconds": spec.first_wait * 2**job.attempts})


class DeliveryQueue:
    """The procrastinate app and this replica's delivery worker, on the store's pool."""

    def __init__(self, db: Database, timing: WorkerTiming, deliveries: Deliveries | None = None):
        self.db = db
        self.timing = timing
        self.app = App(connector=PsycopgConnector())
        self._deliver: Any = None
        if deliveries is not None:
            self._deliver = self.app.task(
                name=DELIVERY_TASK, queue=DELIVERY_QUEUE, retry=Backoff(deliveries)
            )(deliveries.run)
        self._worker: Worker | None = None
        self._worker_task: asyncio.Task[None] | None = None
        self._closing = False

    async def open(self) -> None:
        await self.app.open_async(pool=self.db.pool)

    def start_worker(self, name: str) -> None:
        if self._deliver is None:
            return  # nothing to deliver
        self._worker_task = asyncio.create_task(self._supervise(name), name="job-worker")

    async def _supervise(self, name: str) -> None:
        """Runs the worker, and runs it again if it stops by itself (procrastinate stops a
        worker whose heartbeat or listener fails, e.g. while the database restarts)."""
        while not self._closing:
            self._worker = self._new_worker(name)
            try:
                await self._worker.run()
            except Exception:
                log.exception("the job worker failed")
            if not self._closing:
                log.error("the job worker stopped; starting it again in 1 s")
                await asyncio.sleep(1.0)

    def _new_worker(self, name: str) -> Worker:
        return Worker(
            self.app,
            queues=[DELIVERY_QUEUE],
            name=name,
            concurrency=self.timing.concurrency,
            listen_notify=True,
            install_signal_handlers=False,
            update_heartbeat_interval=self.timing.alive_every,
            stalled_worker_timeout=self.timing.stalled_after,
            shutdown_graceful_timeout=self.timing.shutdown_grace,
            abort_job_polling_interval=1.0,
            fetch_job_polling_interval=2.0,
            # A delivery's outcome is logged; a finished job row is of no further use.
            delete_jobs="always",
        )

    async def enqueue_delivery(self, job: dict[str, Any], lock: str, at: float) -> None:
        """Queues a delivery for `at` (Unix seconds; any replica's worker sends it), unless one
        with the same `lock` is queued already: that one will send what this one would. Jobs
        of one lock run one at a time."""
        if self._deliver is None:
            raise RuntimeError("this job queue delivers no notifications")
        deferrer = self._deliver.configure(
            lock=f"notify-{lock}",
            queueing_lock=f"notify-{lock}",
            schedule_at=datetime.fromtimestamp(at, UTC),
        )
        with contextlib.suppress(exceptions.AlreadyEnqueued):
            await deferrer.defer_async(job=job)

    async def stalled_deliveries(self) -> list[Job]:
        """Notification deliveries whose worker died: sent again (at least once)."""
        jobs = await self.app.job_manager.get_stalled_jobs(
            queue=DELIVERY_QUEUE, seconds_since_heartbeat=self.timing.stalled_after
        )
        return list(jobs)

    async def release(self, job: Job) -> None:
        """Queues a stalled delivery again."""
        assert job.id is not None
        with contextlib.suppress(exceptions.ConnectorException):
            await self.app.job_manager.retry_job(job)

    async def close(self) -> None:
        """Stops the worker: a delivery in flight gets `shutdown_grace` seconds."""
        self._closing = True
        if self._worker is not None and self._worker_task is not None:
            self._worker.stop()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker_task
        await self.app.close_async()
