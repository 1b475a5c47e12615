"""The status a client gets for each way a turn can fail (README: "A turn runs once"); the
provider cases are also exercised end to end by tests/integration/test_turn_once.py."""

from __future__ import annotations

from typing import Any

import pytest
from orchestrator.agent.llm import LLMError
from orchestrator.api.failed_turns import failed_turn
from orchestrator.store.turns import Turn
from orchestrator.turns.turn_failure import failure_of
from orchestrator.usage.budgets import BudgetExceeded


def failed(exc: Exception, tools_ran: int = 0, status: Any = "failed") -> Turn:
    turn = Turn("t1", "s1", "hello", status=status, error=str(exc))
    turn.failure = failure_of(exc, tools_ran).as_json()
    return turn


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (
            LLMError("LLM answered HTTP 400: bad", 400, "context_length_exceeded"),
            400,
            "context_length_exceeded",
        ),
        (LLMError("LLM answered HTTP 404: no such model", 404), 404, "llm_refused"),
        (LLMError("LLM answered HTTP 401: bad key", 401), 424, "llm_auth_failed"),
        (LLMError("LLM answered HTTP 403: forbidden", 403), 424, "llm_auth_failed"),
        (LLMError("LLM answered HTTP 429: slow down", 429), 429, "llm_rate_limited"),
        (LLMError("LLM answered HTTP 408: timeout", 408), 504, "llm_timeout"),
        (LLMError("LLM answered HTTP 503: overloaded", 503), 502, "llm_unavailable"),
        (LLMError("the LLM did not answer within 1 s", timed_out=True), 504, "llm_timeout"),
        (LLMError("cannot reach the LLM at http://x: refused"), 502, "llm_unavailable"),
        (RuntimeError("a bug"), 500, "turn_failed"),
        # A turn queued before a daily cap was passed, refused when it came to run.
        (BudgetExceeded("daily_usd", "refused: the daily budget"), 429, "budget_exceeded"),
    ],
)
def test_each_failure_gets_the_status_of_what_happened(exc: Exception, status: int, code: str):
    answer = failed_turn(failed(exc))
    assert (answer.status, answer.code) == (status, code)
    assert answer.message == f"the turn failed: {exc}"
    response = answer.response({"X-Crayfish-Task": "t1"})
    assert response.headers["x-should-retry"] == "false"  # the openai SDK does not retry it
    assert response.headers["x-crayfish-task"] == "t1"


def test_cancelled_and_interrupted_turns_are_not_retried_either():
    cancelled = failed_turn(Turn("t1", "s1", "hi", status="cancelled", error="cancelled"))
    interrupted = failed_turn(Turn("t2", "s1", "hi", status="interrupted", error="it stopped"))
    assert (cancelled.status, cancelled.code) == (409, "turn_cancelled")
    assert (interrupted.status, interrupted.code) == (503, "turn_interrupted")
    assert interrupted.response({}).headers["x-should-retry"] == "false"


def test_the_message_says_tools_ran_and_a_replay_says_it_is_one():
    turn = failed(LLMError("LLM answered HTTP 500: boom", 500), tools_ran=2)
    assert "2 tool calls ran before the failure" in failed_turn(turn).message
    assert "it was not run again" in failed_turn(turn, replay=True).message
