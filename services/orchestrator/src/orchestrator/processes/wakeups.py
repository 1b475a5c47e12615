"""Wakes a session with a turn when one of its background processes that asked for it
(`notify_on_exit`) ends or is lost.

Every replica watches every tool-runner (WatchProcesses, one stream per address the runners'
name resolves to, looked up again now and then), so an end is seen while any replica lives;
a runner repeats the ends it holds to a watcher that connects later. Every replica that sees an
end queues the same turn id (`proc-<process id>`): the tasks table keeps the first and ignores
the others, so exactly one wake-up turn runs, on whichever replica the line gives it to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from orchestrator.clients.errors import ServiceError
from orchestrator.clients.runner_ring import runner_addresses
from orchestrator.clients.tool_runner import ProcessEnd, ToolRunnerClient
from orchestrator.schedules.heartbeat import HEARTBEAT_TOKEN

log = logging.getLogger(__name__)
WAKE_KIND = "process"
# Seconds between looks at which runners the address names, and before a lost stream retries.
RESOLVE_EVERY = 30.0
RETRY_AFTER = 2.0
# (session id, message, kind, turn id) -> the queued turn.
CreateTurn = Callable[[str, str, str, str], Awaitable[Any]]


def wake_turn_id(process_id: str) -> str:
    return f"proc-{process_id}"


def wake_message(end: ProcessEnd) -> str:
    """The wake-up turn's message: what ended, how, and the end of its output."""
    if end.status == "lost":
        how = f"was lost ({end.reason}): it is no longer running"
    elif end.status == "killed":
        how = f"was killed ({end.reason}), exit code {end.exit_code}"
    else:
        how = f"exited with code {end.exit_code}"
    tail = end.output_tail.strip() or "(no output)"
    return (
        f"[Background process {end.process_id} {how}]\n"
        f"command: {end.command[:500]}\n"
        f"last output:\n{tail}\n\n"
        "(This turn was started by the process ending, not by the user. Tell the user what "
        "matters about it; if nothing needs their attention, reply exactly "
        f"{HEARTBEAT_TOKEN}.)"
    )


class ProcessWakeups:
    """Watches the tool-runners for ends and queues one wake-up turn for each."""

    def __init__(self, client: ToolRunnerClient, address: str, create_turn: CreateTurn):
        self.client = client
        self.address = address
        self.create_turn = create_turn
        self._watches: dict[str, asyncio.Task[None]] = {}
        self._loop: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._loop is None:
            self._loop = asyncio.create_task(self._follow_runners(), name="process-wakeups")

    async def close(self) -> None:
        tasks = [t for t in (self._loop, *self._watches.values()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def wake(self, end: ProcessEnd) -> None:
        """Queues the wake-up turn; a second call for the same end (any replica) adds none."""
        turn_id = wake_turn_id(end.process_id)
        await self.create_turn(end.session_id, wake_message(end), WAKE_KIND, turn_id)
        log.info("process %s %s: wake-up turn %s queued", end.process_id, end.status, turn_id)

    async def _follow_runners(self) -> None:
        while True:
            for address in await runner_addresses(self.address):
                watch = self._watches.get(address)
                if watch is None or watch.done():
                    self._watches[address] = asyncio.create_task(self._watch(address))
            await asyncio.sleep(RESOLVE_EVERY)

    async def _watch(self, address: str) -> None:
        """One runner's ends, for as long as it answers (then its address is looked up again)."""
        while True:
            try:
                async for end in self.client.process_ends(address):
                    try:
                        await self.wake(end)
                    except Exception:  # the store away for a moment: the next watch repeats it
                        log.exception("no wake-up turn for process %s", end.process_id)
                        break
            except ServiceError as exc:
                log.debug("watching %s for process ends: %s", address, exc)
            await asyncio.sleep(RETRY_AFTER)
