"""Moves the output of a `docker exec` from the SDK's blocking iterator into capped buffers."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tool_runner.sandbox.base import ChunkSink, ExecSpec
from tool_runner.sandbox.process import Chunker
from tool_runner.textcap import HeadTail


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
