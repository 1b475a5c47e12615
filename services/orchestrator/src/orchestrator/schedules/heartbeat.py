"""Heartbeats: periodic light turns driven by HEARTBEAT.md, skipped when it lists nothing."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from orchestrator.agent.prompt import HEARTBEAT_TOKEN

if TYPE_CHECKING:
    from orchestrator.content.workspace import WorkspaceFiles
    from orchestrator.store.turns import Turn
    from orchestrator.turns.manager import TurnManager

HEARTBEAT_FILE = "HEARTBEAT.md"
HEARTBEAT_SESSION = "heartbeat"
# A reply of HEARTBEAT_OK plus at most this much text is an acknowledgement, not a message.
ACK_TAIL_CHARS = 300
_COMMENT = re.compile(r"<!--.*?-->", re.S)


def heartbeat_tasks(text: str) -> str:
    """HEARTBEAT.md's text without comments, headings and blank lines; empty: nothing to do."""
    lines = [line.rstrip() for line in _COMMENT.sub("", text).splitlines()]
    meaningful = [
        line
        for line in lines
        if line.strip() and not line.lstrip().startswith("#") and line.strip() not in ("-", "*")
    ]
    return "\n".join(meaningful)


def heartbeat_message(tasks: str) -> str:
    return (
        "Heartbeat. These are the standing tasks from HEARTBEAT.md:\n"
        f"{tasks}\n\n"
        "Do what is due now. If nothing needs the user's attention, reply exactly "
        f"{HEARTBEAT_TOKEN}."
    )


def is_acknowledgement(reply: str) -> bool:
    """True for HEARTBEAT_OK alone or with a short tail: such replies are not delivered."""
    text = reply.strip()
    if not text.startswith(HEARTBEAT_TOKEN) and not text.endswith(HEARTBEAT_TOKEN):
        return False
    return len(text.replace(HEARTBEAT_TOKEN, "", 1).strip()) <= ACK_TAIL_CHARS


class Heartbeats:
    """Queues the heartbeat turn, at its built-in schedule (schedules/builtins.py) or when asked
    (POST /api/heartbeat)."""

    def __init__(self, workspace: WorkspaceFiles, turns: TurnManager):
        self.workspace = workspace
        self.turns = turns

    async def trigger(self) -> Turn | None:
        """The queued heartbeat turn, or None when HEARTBEAT.md lists nothing (no LLM call) or
        a heartbeat is already queued or running."""
        file = (await self.workspace.load([HEARTBEAT_FILE]))[0]
        tasks = heartbeat_tasks(file.text or "")
        if not tasks:
            return None
        if await self.turns.active(kind="heartbeat"):
            return None  # one at a time is plenty
        return await self.turns.create(HEARTBEAT_SESSION, heartbeat_message(tasks), "heartbeat")
