"""A cancelled turn's background processes die with it.

The tool-runner keeps no turn ids, but a session runs one turn at a time: the processes its
session started while the turn ran are the turn's. A cancelled child turn (a subagent's) takes
its processes in its sandbox session (its parent's) the same way when cancelled with its
parent through `cancel_task`.
"""

from __future__ import annotations

import logging
import time

from orchestrator.clients.errors import ServiceError
from orchestrator.clients.tool_runner import ToolRunnerClient
from orchestrator.store.turn_rows import Turn

log = logging.getLogger(__name__)


async def kill_turn_processes(
    client: ToolRunnerClient, turn: Turn, sandbox_session: str = ""
) -> int:
    """Kills the background processes a cancelled turn started in its sandbox session (its own
    session unless given: a subagent's is its parent's); how many (0 on failure, logged: the
    processes then end by their idle timeout)."""
    if turn.status != "cancelled" or turn.started_at is None:
        return 0
    until = turn.finished_at or time.time()
    try:
        killed = await client.kill_processes(
            sandbox_session or turn.session_id, turn.started_at, until
        )
    except ServiceError as exc:
        log.warning("the background processes of cancelled turn %s stay: %s", turn.id, exc)
        return 0
    if killed:
        log.info("killed %d background processes of cancelled turn %s", killed, turn.id)
    return killed
