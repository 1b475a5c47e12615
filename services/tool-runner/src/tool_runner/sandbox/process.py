"""Runs a host process with capped, optionally streamed output and a tree-killing timeout.

Not Process.communicate(): it buffers all output and can neither stream it nor stop at a cap.
Chunks stay bytes, so UTF-8 boundaries are found by hand rather than by an incremental decoder.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from typing import Any

from tool_runner.sandbox.base import ChunkSink, ExecOutcome, Limits
from tool_runner.sandbox.output import HeadTail

READ_SIZE = 65536
# After the main process exits, how long stray holders of its pipes may keep them open.
DRAIN_GRACE = 0.5


def utf8_boundary(buf: bytearray, end: int) -> int:
    """The largest cut <= end that does not split a UTF-8 character (end for non-UTF-8 bytes)."""
    for back in range(1, min(4, end) + 1):
        byte = buf[end - back]
        if byte & 0xC0 != 0x80:  # a lead byte or ASCII, not a continuation byte
            width = 1 if byte < 0x80 else 4 if byte >= 0xF0 else 3 if byte >= 0xE0 else 2
            return end if back >= width else end - back
    return end


class Chunker:
    """Batches output for streaming: a chunk is sent when big enough or old enough."""

    def __init__(self, sink: ChunkSink, size: int, interval: float):
        self.sink, self.size, self.interval = sink, size, interval
        self.buffers: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self.born: dict[str, float] = {}

    async def feed(self, stream: str, data: bytes) -> None:
        buf = self.buffers[stream]
        if not buf:
            self.born[stream] = time.monotonic()
        buf += data
        if len(buf) >= self.size or time.monotonic() - self.born[stream] >= self.interval:
            await self.flush(stream, final=False)

    async def flush(self, stream: str, final: bool = True) -> None:
        """Sends what is buffered in pieces that end on UTF-8 character boundaries.

        Unless final, a character cut in half at the end stays buffered for the next read.
        """
        buf = self.buffers[stream]
        while buf:
            end = min(self.size, len(buf))
            cut = utf8_boundary(buf, end)
            if cut == 0 or (final and end == len(buf)):
                if not final:
                    self.born[stream] = time.monotonic()
                    return
                cut = end
            piece = bytes(buf[:cut])
            del buf[:cut]
            await self.sink(stream, piece)

    async def ticker(self) -> None:
        """Flushes buffers that aged past the interval while the command is quiet."""
        while True:
            await asyncio.sleep(self.interval)
            for stream, buf in self.buffers.items():
                if buf and time.monotonic() - self.born[stream] >= self.interval:
                    await self.flush(stream, final=False)


class _Run:
    """State of one running command."""

    def __init__(self, limits: Limits, chunker: Chunker | None):
        self.limits = limits
        self.chunker = chunker
        self.stdout = HeadTail(limits.output_limit)
        self.stderr = HeadTail(limits.output_limit)
        self.killed = ""
        self.over_output = asyncio.Event()

    async def pump(self, reader: asyncio.StreamReader, name: str, keep: HeadTail) -> None:
        while data := await reader.read(READ_SIZE):
            keep.feed(data)
            if self.chunker is not None and not self.over_output.is_set():
                await self.chunker.feed(name, data)
            if self.stdout.total + self.stderr.total > self.limits.output_kill_bytes:
                self.over_output.set()


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by pid (bwrap then takes its whole namespace down)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def discard_process(proc: asyncio.subprocess.Process) -> None:
    """Kills a started process's group, closes its pipes and reaps it. The pipes close first:
    asyncio's wait() waits for them too, and a stray outside the group may hold them."""
    kill_group(proc.pid)
    _close_pipes(proc)
    with contextlib.suppress(ProcessLookupError):
        await proc.wait()


def _close_pipes(proc: asyncio.subprocess.Process) -> None:
    """Closes pipes killed strays may still hold (asyncio has no public way to do this)."""
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()


async def run_process(
    argv: list[str],
    limits: Limits,
    sink: ChunkSink | None = None,
    chunk: tuple[int, float] = (4096, 0.1),
    kill: Callable[[int], None] = kill_group,
    **spawn: Any,
) -> ExecOutcome:
    """Runs argv to completion, the timeout or the output cap, whichever comes first."""
    proc = await spawn_process(argv, **spawn)
    return await supervise_process(proc, limits, sink, chunk, kill)


async def spawn_process(argv: list[str], **spawn: Any) -> asyncio.subprocess.Process:
    """Starts argv in a session of its own, stdout and stderr piped (stdin: /dev/null unless
    the caller passes stdin=PIPE, as a warm sandbox does to receive its job).

    A cancellation waits for the start to finish, then kills and reaps what it started. Cut
    short, asyncio (3.11) kills only the pid it forked and waits for all of the pipes to close,
    while it goes on connecting them: a descendant that outlives that pid (bwrap's namespace
    before --die-with-parent holds) keeps them open, and the cancelled start never returns.
    """
    spawn.setdefault("stdin", asyncio.subprocess.DEVNULL)
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            **spawn,
        )
    )
    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:
        while not starting.done():  # a start takes milliseconds, however often it is cancelled
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(starting)
        if not starting.cancelled() and starting.exception() is None:
            await discard_process(starting.result())
        raise


async def supervise_process(
    proc: asyncio.subprocess.Process,
    limits: Limits,
    sink: ChunkSink | None = None,
    chunk: tuple[int, float] = (4096, 0.1),
    kill: Callable[[int], None] = kill_group,
) -> ExecOutcome:
    """Reads a started process's output until it exits, the timeout or the output cap; the
    timeout counts from this call."""
    chunker = Chunker(sink, *chunk) if sink is not None else None
    state = _Run(limits, chunker)
    started = time.monotonic()
    assert proc.stdout is not None and proc.stderr is not None
    pumps = asyncio.gather(
        state.pump(proc.stdout, "stdout", state.stdout),
        state.pump(proc.stderr, "stderr", state.stderr),
    )
    ticker = asyncio.ensure_future(chunker.ticker()) if chunker else None
    try:
        state.killed = await _supervise(proc, pumps, state, limits.timeout, kill)
    except BaseException:
        kill(proc.pid)
        _close_pipes(proc)  # now: the awaits below may be cancelled too
        state.killed = "cancelled"
        raise
    finally:
        if ticker is not None:
            ticker.cancel()
        pumps.cancel()
        with contextlib.suppress(BaseException):
            await pumps
        if proc.returncode is None:
            kill(proc.pid)
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()
        _close_pipes(proc)
        await asyncio.sleep(0)  # let the pipe transports finish closing
    if chunker is not None:
        await chunker.flush("stdout")
        await chunker.flush("stderr")
    return ExecOutcome(
        exit_code=proc.returncode if proc.returncode is not None else -1,
        stdout=state.stdout,
        stderr=state.stderr,
        duration_ms=(time.monotonic() - started) * 1000,
        timed_out=state.killed == "timeout",
        killed=state.killed,
    )


async def _supervise(
    proc: asyncio.subprocess.Process,
    pumps: asyncio.Future[Any],
    state: _Run,
    wall: float,
    kill: Callable[[int], None],
) -> str:
    """Waits for exit; returns why the command was killed ('' if it was not)."""
    waiter = asyncio.ensure_future(proc.wait())
    over = asyncio.ensure_future(state.over_output.wait())
    try:
        done, _ = await asyncio.wait(
            {waiter, over}, timeout=wall, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        over.cancel()
    reason = ""
    if waiter not in done:
        reason = "output limit" if over in done else "timeout"
        kill(proc.pid)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), DRAIN_GRACE)
        except TimeoutError:  # asyncio's wait() waits for the pipes, and a stray outside the
            _close_pipes(proc)  # group holds them (no cgroup, or bwrap's namespace orphaned)
            await waiter
    # The command is gone; give its pipes a moment to reach EOF, then stop reading.
    try:
        await asyncio.wait_for(asyncio.shield(pumps), DRAIN_GRACE)
    except TimeoutError:
        kill(proc.pid)  # strays of its group still hold the pipes
    return reason
