"""One command in a session's container: `docker exec`, its output streamed into capped buffers,
and a kill of everything in the container on timeout, output overflow or cancel."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tool_runner.sandbox.base import ChunkSink, ExecOutcome, ExecSpec, sandbox_env, sandbox_workdir
from tool_runner.sandbox.output import HeadTail
from tool_runner.sandbox.process import Chunker

# Each command: run it, then kill everything it left behind (kill(-1) spares pid 1 and itself).
WRAPPER = '/bin/sh -c "$1"; rc=$?; kill -9 -1 2>/dev/null; exit $rc'
KILL_ALL = "kill -9 -1"
# Runs a blocking SDK call in the backend's thread pool.
Call = Callable[..., Awaitable[Any]]


class DockerExec:
    """Runs commands in running containers through the SDK's low-level exec API."""

    def __init__(self, api: Any, call: Call, user: str, chunk: tuple[int, float]):
        self.api = api
        self.call = call
        self.user = user
        self.chunk = chunk

    async def run(self, cid: str, spec: ExecSpec, sink: ChunkSink | None) -> ExecOutcome:
        """Runs spec in container cid; docker.errors.APIError when the container is gone."""
        started = time.monotonic()
        created = await self.call(
            self.api.exec_create,
            cid,
            ["/bin/sh", "-c", WRAPPER, "sh", spec.command],
            user=self.user,
            workdir=sandbox_workdir(spec.workdir),
            environment=sandbox_env(spec.env),
        )
        exec_id = created["Id"]
        stream = await self.call(self.api.exec_start, exec_id, stream=True, demux=True)
        reader = ExecStreamReader(spec, sink, self.chunk)
        loop = asyncio.get_running_loop()
        pump = asyncio.ensure_future(self.call(reader.drain_thread, stream, loop))
        try:
            killed = await reader.consume(spec.limits.timeout)
        except BaseException:
            await self.kill_all(cid)
            raise
        if killed:
            await self.kill_all(cid)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(reader.finish(), 10)
        await asyncio.wait_for(pump, 10)
        info = await self.call(self.api.exec_inspect, exec_id)
        code = info.get("ExitCode")
        return ExecOutcome(
            exit_code=code if code is not None else -1,
            stdout=reader.stdout,
            stderr=reader.stderr,
            duration_ms=(time.monotonic() - started) * 1000,
            timed_out=killed == "timeout",
            killed=killed,
        )

    async def kill_all(self, cid: str) -> None:
        """Kills every process of the container but its pid 1 (best effort)."""
        with contextlib.suppress(Exception):
            created = await self.call(
                self.api.exec_create, cid, ["/bin/sh", "-c", KILL_ALL], user=self.user
            )
            await self.call(self.api.exec_start, created["Id"])


class ExecStreamReader:
    """Moves demuxed exec output from the SDK's blocking iterator into capped buffers."""

    def __init__(self, spec: ExecSpec, sink: ChunkSink | None, chunk: tuple[int, float]):
        self.limits = spec.limits
        self.stdout = HeadTail(spec.limits.output_limit)
        self.stderr = HeadTail(spec.limits.output_limit)
        self.chunker = Chunker(sink, *chunk) if sink is not None else None
        self.queue: asyncio.Queue[tuple[bytes | None, bytes | None] | None] = asyncio.Queue()

    def drain_thread(self, stream: Any, loop: asyncio.AbstractEventLoop) -> None:
        try:
            for item in stream:
                loop.call_soon_threadsafe(self.queue.put_nowait, item)
        finally:
            loop.call_soon_threadsafe(self.queue.put_nowait, None)

    async def consume(self, wall: float) -> str:
        """Reads until the stream ends; returns why the command must be killed, if it must."""
        deadline = time.monotonic() + wall
        ticker = asyncio.ensure_future(self.chunker.ticker()) if self.chunker else None
        try:
            while True:
                try:
                    item = await asyncio.wait_for(self.queue.get(), deadline - time.monotonic())
                except TimeoutError:
                    return "timeout"
                if item is None:
                    return ""
                await self._feed(item)
                if self.stdout.total + self.stderr.total > self.limits.output_kill_bytes:
                    return "output limit"
        finally:
            if ticker is not None:
                ticker.cancel()
            if self.chunker is not None:
                await self.chunker.flush("stdout")
                await self.chunker.flush("stderr")

    async def _feed(self, item: tuple[bytes | None, bytes | None]) -> None:
        for name, data, keep in (
            ("stdout", item[0], self.stdout),
            ("stderr", item[1], self.stderr),
        ):
            if data:
                keep.feed(data)
                if self.chunker is not None:
                    await self.chunker.feed(name, data)

    async def finish(self) -> None:
        """Discards what is still queued until the stream's end marker."""
        while await self.queue.get() is not None:
            pass
