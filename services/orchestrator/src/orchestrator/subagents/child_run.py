"""A child's run: a turn in its own session with the minimal prompt, its parent's sandbox, the
tools its depth allows, the parent's steering read between rounds, and a timeout; its answer is
its result (a failure is a result too: reports.py tells the parent either way)."""

from __future__ import annotations

import asyncio
from typing import Any

from orchestrator.agent.turn_context import turn_context, with_turn_context
from orchestrator.content.assistant import Assistant, origin_of, system_message
from orchestrator.store.subagents import Child, SubagentStore
from orchestrator.store.turns import Turn
from orchestrator.subagents.tools import SPAWN, SUBAGENTS
from orchestrator.turns.events import EventSink

CHILD_NOTE = """## Subagent
You are a subagent: another agent gave you the task in the user message. You share its
workspace and sandbox, not its conversation, and no one can answer questions you ask. Do the
task with your tools, then answer with the result: your final answer is handed to that agent
as it is, so make it complete and self-contained (what you found or did, with paths and
figures). A message marked [From the parent agent] may arrive while you work: follow it."""


class ChildTimedOut(Exception):
    """A child ran past its timeout_s: it fails with this reason (its parent reads it)."""


class ChildRun:
    """Runs child turns with the assistant's loop and tools."""

    def __init__(self, assistant: Assistant, store: SubagentStore, max_depth: int, denied: str):
        self.assistant = assistant
        self.store = store
        self.max_depth = max_depth
        self.denied = frozenset(n.strip() for n in denied.split(",") if n.strip())

    def hidden_tools(self, depth: int) -> frozenset[str]:
        """The tools a child at `depth` is not offered."""
        if depth >= self.max_depth:
            return self.denied | {SPAWN, SUBAGENTS}
        return self.denied

    async def run(self, turn: Turn, emit: EventSink) -> str:
        child = await self.store.get(turn.id)
        if child is None:  # its row is written with its turn: a turn queued by hand
            raise ValueError(f"turn {turn.id} is no subagent's")
        try:
            async with asyncio.timeout(child.timeout_s):
                return await self._converse(turn, child, emit)
        except TimeoutError:
            raise ChildTimedOut(
                f"the subagent ran out of time: its timeout_s is {child.timeout_s:g} s"
            ) from None

    async def _converse(self, turn: Turn, child: Child, emit: EventSink) -> str:
        assistant, hidden = self.assistant, self.hidden_tools(child.depth)
        system = await assistant.system_prompt("minimal", hidden)
        context = turn_context(assistant.settings.timezone)
        user = {"role": "user", "content": with_turn_context(turn.message, context)}
        await assistant.turns.accept(turn, user, load=False)  # from here it has side effects
        messages: list[dict[str, Any]] = [system_message(f"{system}\n\n{CHILD_NOTE}"), user]
        offered = {name for name in assistant.registry.tools if name not in hidden}

        async def steering() -> list[str]:
            return [f"[From the parent agent] {m}" for m in await self.store.take_steering(turn.id)]

        outcome = await assistant.loop.run(
            messages,
            child.sandbox_session,  # the parent's sandbox: its tools see the parent's files
            emit,
            lambda group: assistant.turns.append_turn(turn, group),
            turn.usage,
            only=offered,
            origin=origin_of(turn),
            gate=assistant.gate(turn, emit, child.sandbox_session),
            model=turn.model,
            inbox=steering,
        )
        turn.delivered = False  # its answer goes to its parent, not to a person
        shown = {"text": outcome.text, "delivered": False, "rounds": outcome.rounds}
        await emit("assistant.message", shown)
        return outcome.text
