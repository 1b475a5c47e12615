"""What one LLM request cost: its record (tokens, latency, price, who asked), handed to a
recorder at the one place a request ends, whether it answered or failed."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from orchestrator.agent.presets import ModelPrice

# Kinds of requests: a turn's own kind (chat, schedule, heartbeat, openai, subagent,
# consolidation), "compaction" for the requests that flush and summarise a session's history,
# "summary" for an idle session's summary (consolidation/idle.py).
COMPACTION = "compaction"
# The background kinds: their own budget caps, and CRAYFISH_MODEL_BACKGROUND's preset.
BACKGROUND_KINDS = frozenset(
    {"heartbeat", "schedule", "subagent", "consolidation", "summary", "process"}
)


@dataclass(frozen=True)
class RequestOrigin:
    """Who asked: the session and task of the turn, and the kind of request."""

    session_id: str = ""
    task_id: str = ""
    kind: str = "chat"


@dataclass
class LLMRequestRecord:
    """One request to the provider (its retries included), as `llm_requests` keeps it.
    `preset` is the configured name of the model asked for; `model` is what served it."""

    origin: RequestOrigin
    preset: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    latency_ms: float = 0.0
    price: float | None = None  # USD, None when the model has no price table
    error: str = ""
    at: float = field(default_factory=time.time)


Recorder = Callable[[LLMRequestRecord], Awaitable[None]]
# Asked before each request; raises to refuse it (the usage budget, usage/budgets.py).
Gate = Callable[[RequestOrigin], Awaitable[None]]


def price_of(price: ModelPrice | None, prompt: int, completion: int, cached: int) -> float | None:
    """USD for these tokens at a per-million price table; cached prompt tokens at their own
    price (the input price when the table names none)."""
    if price is None:
        return None
    cached = min(cached, prompt)
    cached_rate = price.input if price.cached is None else price.cached
    total = (prompt - cached) * price.input + cached * cached_rate + completion * price.output
    return total / 1_000_000
