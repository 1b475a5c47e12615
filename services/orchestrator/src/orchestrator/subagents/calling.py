"""The turn whose tool call runs now: the orchestrator's own tools get only a session id from
the registry, and a child shares its parent's session for its sandbox, so `spawn` and
`subagents` learn who calls them from here (set by the core for each turn's run)."""

from __future__ import annotations

from contextvars import ContextVar

from orchestrator.store.turns import Turn

calling_turn: ContextVar[Turn | None] = ContextVar("calling_turn", default=None)
