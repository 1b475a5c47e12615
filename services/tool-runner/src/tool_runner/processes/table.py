"""The background processes of this tool-runner: start, follow, write to, kill, expire, report.

A process belongs to the session that started it: every lookup names the session, and another
session's process id is answered as unknown. Output of stdout and stderr goes, interleaved, into
one ring buffer per process. A process ends by itself, by `kill`, past the idle timeout or the
maximum lifetime, or when its session is closed; each end is kept (for `poll`) until the idle
timeout and told to every watcher (the orchestrator wakes a session for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from tool_runner.config import ToolRunnerSettings
from tool_runner.processes.records import ProcessRecord, ProcessRecords
from tool_runner.processes.ring import RingBuffer
from tool_runner.sandbox.base import Background, ExecSpec, Sandbox

log = logging.getLogger(__name__)
READ_SIZE = 65536
# How often limits are checked.
SWEEP_SECONDS = 1.0
# An ended process is kept (for poll, log, list) at least this long, or the idle timeout.
KEEP_ENDED_SECONDS = 600.0


class ProcessRefused(Exception):
    """A process cannot be started or found; the message says why (a tool result)."""


@dataclass
class Tracked:
    """One process: its record, its output, and (while it runs) its sandbox handle."""

    record: ProcessRecord
    output: RingBuffer
    handle: Background | None = None
    # Absolute output offset the last poll read up to.
    polled: int = 0
    touched: float = field(default_factory=time.monotonic)
    born: float = field(default_factory=time.monotonic)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    follower: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.record.status == "running"


class ProcessTable:
    """Every background process this tool-runner holds, and the ends watchers are told of."""

    def __init__(self, settings: ToolRunnerSettings, sandbox: Sandbox):
        self.settings = settings
        self.sandbox = sandbox
        self.records = ProcessRecords(settings.data_dir / "processes")
        self._procs: dict[str, Tracked] = {}
        self._watchers: set[asyncio.Queue[Tracked]] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self._kills: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Reports the previous tool-runner's processes as lost, then checks limits."""
        for record in self.records.load():
            if record.status == "running":
                record.status, record.reason = "lost", "tool-runner restarted"
                record.ended = time.time()
                self.records.save(record)
                log.warning("background process %s (%s) was lost", record.id, record.session_id)
            self._procs[record.id] = Tracked(record, RingBuffer(0))
            self._procs[record.id].done.set()
        self._sweeper = asyncio.create_task(self._sweep(), name="process-limits")

    async def launch(self, spec: ExecSpec, notify: bool) -> Tracked:
        """Starts spec as a background process of its session; ProcessRefused past the limit."""
        session = spec.session_id
        if len(self.running(session)) >= self.settings.max_processes_per_session:
            raise ProcessRefused(
                f"this session has {self.settings.max_processes_per_session} background processes"
                " running, the most it may (TOOL_RUNNER_MAX_PROCESSES_PER_SESSION): kill one"
                " with the process tool first"
            )
        process_id = f"p{uuid.uuid4().hex[:12]}"
        record = ProcessRecord(process_id, session, spec.command, time.time(), notify)
        tracked = Tracked(record, RingBuffer(self.settings.process_buffer_bytes))
        self.records.save(record)
        self._procs[record.id] = tracked
        try:
            tracked.handle = await self.sandbox.start_background(spec)
        except BaseException:
            del self._procs[record.id]
            self.records.forget(record.id)
            await self._maybe_ended(session)
            raise
        tracked.follower = asyncio.create_task(self._follow(tracked), name=f"process-{record.id}")
        log.info("background process %s started for session %s", record.id, session)
        return tracked

    def running(self, session_id: str) -> list[Tracked]:
        return [t for t in self.of_session(session_id) if t.running]

    def of_session(self, session_id: str) -> list[Tracked]:
        return [t for t in self._procs.values() if t.record.session_id == session_id]

    def get(self, session_id: str, process_id: str) -> Tracked:
        """The session's process; ProcessRefused for any other (another session's too)."""
        tracked = self._procs.get(process_id)
        if tracked is None or tracked.record.session_id != session_id:
            raise ProcessRefused(f"no background process {process_id!r} in this session")
        tracked.touched = time.monotonic()
        return tracked

    async def write(self, tracked: Tracked, data: str, eof: bool) -> None:
        handle = tracked.handle
        if not tracked.running or handle is None:
            raise ProcessRefused(f"process {tracked.record.id} is not running")
        stdin = handle.stdin
        if stdin.is_closing():
            raise ProcessRefused(f"process {tracked.record.id}'s input was closed (eof)")
        try:
            stdin.write(data.encode())
            await asyncio.wait_for(stdin.drain(), 10)
            if eof:
                stdin.close()
        except OSError:  # a broken pipe, or the docker backend's socket gone
            raise ProcessRefused(f"process {tracked.record.id} no longer reads its input") from None
        except TimeoutError:
            raise ProcessRefused(f"process {tracked.record.id} is not reading its input") from None

    async def kill(self, tracked: Tracked, reason: str = "killed") -> None:
        """Kills the whole tree and waits until it is reaped (a no-op once it has ended)."""
        if tracked.running and tracked.handle is not None:
            tracked.record.reason = tracked.record.reason or reason
            await tracked.handle.kill()
        await tracked.done.wait()

    async def kill_started(self, session_id: str, since: float, until: float) -> int:
        """Kills the session's processes started within [since, until] (those of a cancelled
        turn); returns how many were running."""
        procs = [t for t in self.running(session_id) if since <= t.record.started <= until]
        await asyncio.gather(*(self.kill(t, "its turn was cancelled") for t in procs))
        return len(procs)

    async def close_session(self, session_id: str) -> None:
        """Kills the session's processes and forgets all of them (the session is gone)."""
        procs = self.of_session(session_id)
        await asyncio.gather(*(self.kill(t, "session closed") for t in procs))
        for tracked in procs:
            self._forget(tracked)

    async def watch(self) -> AsyncIterator[Tracked]:
        """Every end of a process that asked for a notice: those still kept, then each new."""
        queue: asyncio.Queue[Tracked] = asyncio.Queue()
        for tracked in self._procs.values():
            if not tracked.running and tracked.record.notify:
                queue.put_nowait(tracked)
        self._watchers.add(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self._watchers.discard(queue)

    async def close(self) -> None:
        """Kills every process (the service stops); their records stay: a next tool-runner on
        this data folder reports them lost only if they were left running."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        await asyncio.gather(
            *(self.kill(t, "tool-runner stopped") for t in list(self._procs.values()))
        )

    async def _follow(self, tracked: Tracked) -> None:
        """Reads the output until the process ends, then records and tells of the end."""
        handle = tracked.handle
        assert handle is not None
        code = None
        try:
            pumps = (self._pump(handle.stdout, tracked), self._pump(handle.stderr, tracked))
            await asyncio.gather(*pumps)
            code = await handle.wait()
        finally:
            if code is None:  # cancelled (the service stops): what it started dies with it
                await handle.kill()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(handle.wait(), 10)
            await handle.release()  # anything left in its cgroup is killed
            self._ended(tracked, code)
        log.info("background process %s ended (exit %s)", tracked.record.id, code)
        await self._maybe_ended(tracked.record.session_id)

    async def _pump(self, reader: asyncio.StreamReader, tracked: Tracked) -> None:
        while data := await reader.read(READ_SIZE):
            tracked.output.append(data)

    def _ended(self, tracked: Tracked, code: int | None) -> None:
        record = tracked.record
        record.status = "killed" if record.reason else "exited"
        record.exit_code = code if code is not None else -1
        record.ended = time.time()
        tracked.touched = time.monotonic()  # kept for a poll until the idle timeout from now
        self.records.save(record)
        tracked.done.set()
        if record.notify:
            for queue in self._watchers:
                queue.put_nowait(tracked)

    async def _maybe_ended(self, session_id: str) -> None:
        if not self.running(session_id):
            await self.sandbox.processes_ended(session_id)

    def _forget(self, tracked: Tracked) -> None:
        self._procs.pop(tracked.record.id, None)
        self.records.forget(tracked.record.id)

    async def _sweep(self) -> None:
        s = self.settings
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            now = time.monotonic()
            keep = max(s.process_idle_seconds, KEEP_ENDED_SECONDS)
            for tracked in list(self._procs.values()):
                idle = now - tracked.touched > s.process_idle_seconds
                if tracked.running and now - tracked.born > s.process_max_seconds:
                    self._kill_soon(tracked, "max lifetime")
                elif tracked.running and idle:
                    self._kill_soon(tracked, "idle timeout")
                elif not tracked.running and now - tracked.touched > keep:
                    self._forget(tracked)

    def _kill_soon(self, tracked: Tracked, reason: str) -> None:
        if tracked.record.reason:
            return  # being killed already
        log.info("background process %s: %s", tracked.record.id, reason)
        task = asyncio.create_task(self.kill(tracked, reason))
        self._kills.add(task)
        task.add_done_callback(self._kills.discard)
