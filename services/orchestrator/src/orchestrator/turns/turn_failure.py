"""What made a turn fail, kept with its task (tasks.failure), so that whichever replica answers
its client (or a retry of it) can say what happened; api/failed_turns.py maps it to a status."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

from orchestrator.agent.llm import LLMError
from orchestrator.usage.budgets import BudgetExceeded

Cause = Literal["llm_status", "llm_timeout", "llm_unavailable", "budget", "internal"]
CAUSES = get_args(Cause)


@dataclass(frozen=True)
class TurnFailure:
    """`llm_status`/`llm_code`: the provider's error status and code (cause "llm_status");
    `tools_ran`: tool calls the turn had started before it failed."""

    cause: Cause
    llm_status: int | None = None
    llm_code: str | None = None
    tools_ran: int = 0

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> TurnFailure | None:
        """The failure a task row keeps; None for none (or an unknown shape)."""
        if not isinstance(data, dict) or data.get("cause") not in CAUSES:
            return None
        status, code, tools = data.get("llm_status"), data.get("llm_code"), data.get("tools_ran")
        return cls(
            data["cause"],
            status if isinstance(status, int) else None,
            code if isinstance(code, str) else None,
            tools if isinstance(tools, int) else 0,
        )


def failure_of(exc: BaseException, tools_ran: int) -> TurnFailure:
    """The failure an exception that ended a turn stands for."""
    if isinstance(exc, BudgetExceeded):
        return TurnFailure("budget", llm_code=exc.cap, tools_ran=tools_ran)
    if isinstance(exc, LLMError):
        if exc.status is not None:
            return TurnFailure("llm_status", exc.status, exc.code, tools_ran)
        cause: Cause = "llm_timeout" if exc.timed_out else "llm_unavailable"
        return TurnFailure(cause, tools_ran=tools_ran)
    return TurnFailure("internal", tools_ran=tools_ran)
