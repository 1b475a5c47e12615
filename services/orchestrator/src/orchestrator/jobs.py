"""Turns as jobs of a PostgreSQL queue (procrastinate): one run per session at a time, in order,
across every worker of every replica (`lock` = the session), with abort by LISTEN/NOTIFY and
worker heartbeats that expose the jobs of a replica that died.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from crayfish_common.tracing import attach_carrier, current_carrier, detach
from procrastinate import App, JobContext, PsycopgConnector, RetryStrategy, exceptions
from procrastinate.job_context import AbortReason
from procrastinate.jobs import Job, Status
from procrastinate.retry import BaseRetryStrategy, RetryDecision
from procrastinate.types import JSONValue
from procrastinate.worker import Worker

from orchestrator.store.database import Connection, Database

log = logging.getLogger(__name__)

QUEUE = "turns"
TASK_NAME = "crayfish.turn"
DELIVERY_QUEUE = "notify"
DELIVERY_TASK = "crayfish.notify"
# What a job runs: run(task id, cancelled_by_user), where cancelled_by_user() tells, once the
# job was cancelled, whether a user asked (else the replica is shutting down).
JobRunner = Callable[[str, Callable[[], bool]], Awaitable[None]]


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


class TurnNotBegun(Exception):
    """Raised by a job stopped (replica shutting down) before its turn did anything: the job is
    put back at the head of its session's line, for any replica."""


@dataclass(frozen=True)
class WorkerTiming:
    concurrency: int = 100
    heartbeat: float = 2.0  # seconds between a worker's heartbeats
    stalled_after: float = 10.0  # a worker silent this long is dead, its jobs stalled
    shutdown_grace: float = 3.0  # seconds a stopping replica lets running turns finish


class JobQueue:
    """The procrastinate app and this replica's worker, on the store's connection pool."""

    def __init__(
        self,
        db: Database,
        run: JobRunner,
        timing: WorkerTiming,
        deliveries: Deliveries | None = None,
    ):
        self.db = db
        self.timing = timing
        self.app = App(connector=PsycopgConnector())
        self._run = run

        async def turn(
            context: JobContext, task_id: str, trace: dict[str, str] | None = None
        ) -> None:
            # `trace`: the W3C context of the request that queued the turn (one trace per turn).
            token = attach_carrier(trace)
            try:
                await self._run(task_id, lambda: context.abort_reason() == AbortReason.USER_REQUEST)
            finally:
                detach(token)

        self._task = self.app.task(
            name=TASK_NAME,
            queue=QUEUE,
            pass_context=True,
            retry=RetryStrategy(retry_exceptions=[TurnNotBegun]),
        )(turn)
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
            queues=[QUEUE, DELIVERY_QUEUE],
            name=name,
            concurrency=self.timing.concurrency,
            listen_notify=True,
            install_signal_handlers=False,
            update_heartbeat_interval=self.timing.heartbeat,
            stalled_worker_timeout=self.timing.stalled_after,
            shutdown_graceful_timeout=self.timing.shutdown_grace,
            abort_job_polling_interval=1.0,
            fetch_job_polling_interval=2.0,
            # The task row is the record; a finished job row is of no further use.
            delete_jobs="always",
        )

    async def enqueue(self, conn: Connection, task_id: str, session_id: str) -> int:
        """Adds the turn's job inside the caller's transaction; returns the job id."""
        deferrer = self._task.configure(lock=f"session:{session_id}", connection=conn)
        trace: dict[str, JSONValue] = dict(current_carrier())
        if trace:
            return await deferrer.defer_async(task_id=task_id, trace=trace)
        return await deferrer.defer_async(task_id=task_id)

    async def enqueue_delivery(self, job: dict[str, Any]) -> None:
        """Queues one notification delivery (any replica's worker sends it)."""
        if self._deliver is None:
            raise RuntimeError("this job queue delivers no notifications")
        await self._deliver.defer_async(job=job)

    async def cancel_queued(self, job_id: int) -> bool:
        """True if the job had not started and now never will."""
        return await self.app.job_manager.cancel_job_by_id_async(job_id)

    async def abort(self, job_id: int) -> bool:
        """Asks whichever worker runs the job to stop it (it hears by NOTIFY)."""
        return await self.app.job_manager.cancel_job_by_id_async(job_id, abort=True)

    async def stalled(self) -> list[Job]:
        """Running jobs whose worker stopped sending heartbeats."""
        jobs = await self.app.job_manager.get_stalled_jobs(
            queue=QUEUE, seconds_since_heartbeat=self.timing.stalled_after
        )
        return list(jobs)

    async def stalled_deliveries(self) -> list[Job]:
        """Notification deliveries whose worker died: sent again (at least once)."""
        jobs = await self.app.job_manager.get_stalled_jobs(
            queue=DELIVERY_QUEUE, seconds_since_heartbeat=self.timing.stalled_after
        )
        return list(jobs)

    async def release(self, job: Job, run_again: bool) -> None:
        """Ends a stalled job (freeing its session for the next one), or puts it back first in
        its session's line when it never got to do anything."""
        assert job.id is not None
        with contextlib.suppress(exceptions.ConnectorException):
            if run_again:
                await self.app.job_manager.retry_job(job)
            else:
                await self.app.job_manager.finish_job(job, Status.FAILED, delete_job=False)

    async def close(self) -> None:
        """Stops the worker: running turns get `shutdown_grace` seconds, then are aborted."""
        self._closing = True
        if self._worker is not None and self._worker_task is not None:
            self._worker.stop()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker_task
        await self.app.close_async()


def job_info(job: Job) -> dict[str, Any]:
    return {"job_id": job.id, "task_id": job.task_kwargs.get("task_id"), "lock": job.lock}
