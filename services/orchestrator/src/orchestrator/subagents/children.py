"""The Subagents façade: spawn a child under the limits, wait for, list, cancel and steer the
children of a conversation, cancel a cancelled turn's children, and the prompt's note of the
active ones. A child's run: child_run.py; its end told to the parent: reports.py."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from crayfish_common.tools import ToolError, ToolResult

from orchestrator.agent.turn_models import TurnModels
from orchestrator.config import Settings
from orchestrator.store.subagents import KIND, Child, SpawnLimits, SubagentStore
from orchestrator.store.turns import Turn
from orchestrator.turns.manager import TurnManager
from orchestrator.usage.budgets import BudgetGuard

log = logging.getLogger(__name__)


class Subagents:
    """Children of turns, spawned and managed through the model's tools."""

    def __init__(
        self,
        settings: Settings,
        store: SubagentStore,
        turns: TurnManager,
        models: TurnModels,
        budgets: BudgetGuard,
    ):
        self.settings = settings
        self.store = store
        self.turns = turns
        self.models = models
        self.budgets = budgets
        self.limits = SpawnLimits(settings.subagents_per_parent, settings.subagents_running)

    async def spawn(
        self,
        parent: Turn,
        task: str,
        label: str = "",
        model: str = "",
        wait: bool = False,
        timeout_s: float | None = None,
    ) -> ToolResult:
        """A new child of `parent`; its id at once, or with `wait` its end (bounded)."""
        depth, sandbox = await self._place(parent)
        timeout = self._checked(depth, timeout_s)
        await self.budgets.check(KIND)
        child_id = uuid.uuid4().hex
        await self.models.ask(model, child_id)  # UnknownModel: the model is told the names
        child = Child(
            child_id, parent.id, parent.session_id, f"subagent-{child_id}", sandbox,
            label.strip(), depth, timeout, time.time(), waited=wait,
        )  # fmt: skip
        await self.store.spawn(child, task, self.limits)  # SpawnRefused: the limit, told
        log.info("turn %s spawned subagent %s (%s)", parent.id, child_id, child.label)
        if wait:
            return _results(await self._await_ends([child]))
        return ToolResult(
            True,
            f"Spawned subagent {child_id}{_named(child)}. Its result will arrive in this "
            "conversation as a message when it ends; you need not wait or poll.",
            {"id": child_id, "status": "queued"},
        )

    async def _place(self, parent: Turn) -> tuple[int, str]:
        """A new child's depth and sandbox session: under a conversation's turn, 1 and that
        session's; under a child, one deeper and the child's sandbox."""
        mine = await self.store.get(parent.id) if parent.kind == KIND else None
        if mine is None:
            return 1, parent.session_id
        return mine.depth + 1, mine.sandbox_session

    def _checked(self, depth: int, timeout_s: float | None) -> float:
        """The child's timeout; ToolError past the depth or the longest timeout."""
        settings = self.settings
        if depth > settings.subagent_max_depth:
            raise ToolError(
                f"not spawned: subagents may be {settings.subagent_max_depth} deep at most, "
                "and this one would be deeper; do the work yourself"
            )
        timeout = float(timeout_s or settings.subagent_timeout)
        if timeout > settings.subagent_timeout_max:
            raise ToolError(
                f"not spawned: timeout_s may be {settings.subagent_timeout_max:g} at most"
            )
        return timeout

    async def wait(self, parent: Turn, ids: list[str]) -> ToolResult:
        return _results(await self._await_ends(await self._owned(parent, ids)))

    async def _await_ends(self, children: list[Child]) -> list[Child]:
        """Waits for the children's ends, at most CRAYFISH_SUBAGENT_WAIT_MAX seconds (the
        waiting turn holds a worker slot); an end seen here is told here, not reported again;
        a child still running is reported by a turn when it ends."""
        unreported = [c for c in children if c.reported_at is None]
        for child in unreported:
            if not child.waited:
                await self.store.set_waited(child.child_id, True)
        deadline = time.monotonic() + self.settings.subagent_wait_max
        try:
            ends = await asyncio.gather(
                *(self.turns.wait(c.child_id, deadline - time.monotonic()) for c in children)
            )
            for child, turn in zip(children, ends, strict=True):
                child.turn = turn
        finally:
            for child in unreported:
                if not (child.turn is not None and child.turn.done):
                    await self.store.set_waited(child.child_id, False)
                else:
                    await self.store.claim_report(child.child_id)
        return children

    async def listing(self, parent: Turn, ids: list[str]) -> ToolResult:
        children = await self.store.of_session(parent.session_id)
        if ids:
            children = [c for c in children if c.child_id in ids]
        if not children:
            return ToolResult(True, "No subagents in this conversation.", {"subagents": []})
        lines = [_line(c) for c in children]
        shown = [{"id": c.child_id, "label": c.label, "status": c.status} for c in children]
        return ToolResult(True, "\n".join(lines), {"subagents": shown})

    async def cancel(self, parent: Turn, ids: list[str]) -> ToolResult:
        lines = []
        for child in await self._owned(parent, ids):
            if child.turn is None or child.turn.done:
                lines.append(f"{child.child_id}: already {child.status}")
                continue
            await self.store.claim_report(child.child_id)  # told here: no report turn
            ended = await self.turns.cancel(child.turn)
            await self.cancel_children(child.child_id)
            lines.append(f"{child.child_id}: {ended.status}")
        return ToolResult(True, "\n".join(lines))

    async def steer(self, parent: Turn, ids: list[str], message: str) -> ToolResult:
        lines = []
        for child in await self._owned(parent, ids):
            sent = await self.store.steer(child.child_id, message)
            state = "sent; it reads it before its next step" if sent else "not running"
            lines.append(f"{child.child_id}: {state}")
        return ToolResult(True, "\n".join(lines))

    async def cancel_children(self, parent_id: str) -> list[tuple[Child, Turn]]:
        """Cancels the turn's children still queued or running, and theirs; the cancelled
        parent's session gets no report of them. Returns each cancelled child with its turn
        as it then is."""
        cancelled: list[tuple[Child, Turn]] = []
        for child in await self.store.of_parent(parent_id):
            if child.turn is not None and not child.turn.done:
                await self.store.claim_report(child.child_id)
                cancelled.append((child, await self.turns.cancel(child.turn)))
                log.info("subagent %s cancelled with its parent %s", child.child_id, parent_id)
            cancelled += await self.cancel_children(child.child_id)
        return cancelled

    async def cancel_in_session(self, session_id: str) -> list[tuple[Child, Turn]]:
        """Cancels the children the session's turns spawned that are still at work, and
        theirs (a deleted session's sandbox goes with it): no report reaches it."""
        cancelled: list[tuple[Child, Turn]] = []
        for child in await self.store.of_session(session_id, active_only=True):
            if child.turn is not None and not child.turn.done:
                await self.store.claim_report(child.child_id)
                cancelled.append((child, await self.turns.cancel(child.turn)))
                log.info("subagent %s cancelled with its session %s", child.child_id, session_id)
            cancelled += await self.cancel_children(child.child_id)
        return cancelled

    async def active_note(self, session_id: str) -> str:
        """The prompt's line on the session's children still at work (none: "")."""
        active = await self.store.of_session(session_id, active_only=True)
        if not active:
            return ""
        now = time.time()
        listed = "; ".join(
            f"{c.child_id}{_named(c)} {c.status} for {now - c.created_at:.0f} s" for c in active
        )
        return (
            f"[Subagents at work: {listed}. Each one's result arrives here as a message when "
            "it ends; do not poll them.]"
        )

    async def children_of(self, parent_id: str) -> list[Child]:
        return await self.store.of_parent(parent_id)

    async def _owned(self, parent: Turn, ids: list[str]) -> list[Child]:
        """The children of these ids spawned in the caller's conversation; ToolError naming
        an id that is none of them."""
        mine = {c.child_id: c for c in await self.store.of_session(parent.session_id)}
        unknown = [i for i in ids if i not in mine]
        if unknown:
            raise ToolError(f"no subagent {', '.join(unknown)} in this conversation")
        return [mine[i] for i in dict.fromkeys(ids)]


def _named(child: Child) -> str:
    return f" ({child.label!r})" if child.label else ""


def _line(child: Child) -> str:
    turn = child.turn
    shown = outcome_text(turn)[:300] if turn is not None and turn.done else child.status
    return f"- {child.child_id}{_named(child)}: {shown}"


def outcome_text(turn: Turn) -> str:
    """A child's end as its parent reads it: its answer, or why it has none."""
    if turn.status == "completed":
        return f"completed:\n{turn.result or '(it answered nothing)'}"
    return f"{turn.status}: {turn.error or 'no reason recorded'}"


def _results(children: list[Child]) -> ToolResult:
    """Waited children: each one's end, or that it still runs (its result comes later)."""
    parts, data = [], []
    for child in children:
        turn = child.turn
        if turn is None or not turn.done:
            parts.append(
                f"Subagent {child.child_id}{_named(child)} is still {child.status}; its result "
                "will arrive in this conversation as a message when it ends."
            )
        else:
            parts.append(f"Subagent {child.child_id}{_named(child)} {outcome_text(turn)}")
        data.append({"id": child.child_id, "status": child.status})
    return ToolResult(True, "\n\n".join(parts), {"subagents": data})
