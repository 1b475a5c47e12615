"""The HTTP answer to a turn that did not complete, chosen by what happened (README: "A turn
runs once"). Crayfish already retried the provider itself (CRAYFISH_LLM_RETRIES), so no such
answer invites a client to run the turn again: each carries `x-should-retry: false`, which the
openai SDK (and the other Stainless SDKs: LangChain and `llm` use it) obeys before its own rule
of retrying 408, 409, 429 and 5xx (openai/_base_client.py, `_should_retry`)."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi.responses import JSONResponse

from orchestrator.api.errors import error_body
from orchestrator.store.turns import Turn
from orchestrator.turns.turn_failure import TurnFailure

NO_RETRY = {"x-should-retry": "false"}


@dataclass(frozen=True)
class FailedTurn:
    status: int
    message: str
    code: str

    def body(self) -> dict[str, object]:
        return error_body(self.status, self.message, self.code)

    def response(self, headers: dict[str, str]) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers={**headers, **NO_RETRY})


def failed_turn(turn: Turn, replay: bool = False) -> FailedTurn:
    """The status, message and code for a turn that ended without completing (`replay`: the
    answer to a retry of the request that started it)."""
    answer = _failed_turn(turn)
    if not replay:
        return answer
    note = (
        " [the answer to an earlier identical request: it was not run again; change the request"
        " (or wait CRAYFISH_RETRY_WINDOW seconds) to run it anew]"
    )
    return FailedTurn(answer.status, answer.message + note, answer.code)


def _failed_turn(turn: Turn) -> FailedTurn:
    if turn.status == "cancelled":
        return FailedTurn(409, "the turn was cancelled", "turn_cancelled")
    if turn.status == "interrupted":
        return FailedTurn(503, f"the turn was interrupted: {turn.error}", "turn_interrupted")
    status, code = _status(TurnFailure.from_json(turn.failure))
    return FailedTurn(status, f"the turn failed: {turn.error}{tools_note(turn)}", code)


def tools_note(turn: Turn) -> str:
    """What a failed turn's client must know before it asks again: tools already ran."""
    failure = TurnFailure.from_json(turn.failure)
    if failure is None or not failure.tools_ran:
        return ""
    calls = "1 tool call" if failure.tools_ran == 1 else f"{failure.tools_ran} tool calls"
    return (
        f" ({calls} ran before the failure; a retry of this request gets this answer,"
        " it does not run the turn again)"
    )


def _status(failure: TurnFailure | None) -> tuple[int, str]:
    if failure is None or failure.cause == "internal":
        return 500, "turn_failed"
    if failure.cause == "budget":
        return 429, "budget_exceeded"
    if failure.cause == "llm_timeout":
        return 504, "llm_timeout"
    if failure.cause == "llm_unavailable" or failure.llm_status is None:
        return 502, "llm_unavailable"
    status = failure.llm_status
    if status in (401, 403):  # Crayfish's key, not the client's: a 401 would blame the client
        return 424, "llm_auth_failed"
    if status == 408:
        return 504, "llm_timeout"
    if status == 429:
        return 429, "llm_rate_limited"
    if 400 <= status < 500:  # the provider refused what was asked: its words, its status
        return status, failure.llm_code or "llm_refused"
    return 502, "llm_unavailable"
