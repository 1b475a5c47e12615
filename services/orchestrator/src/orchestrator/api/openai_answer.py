"""A /v1 turn's answer as the client sees it: the assistant message (text, or the calls of its
tools), its stream's tool-call chunks, the provider's refusal in OpenAI's error shape, and the
conversation the session remembers afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import JSONResponse

from orchestrator.agent.client_request import ClientAnswer
from orchestrator.agent.llm import ToolCall
from orchestrator.api.conversation import START, extend
from orchestrator.api.openai_request import TurnPlan
from orchestrator.core import OrchestratorCore
from orchestrator.store import StoredEvent
from orchestrator.store.tasks import Task

# Events a turn sends before its first LLM answer: a stream waits past them before it begins,
# so a refusal of the first request can still be answered with the provider's status.
BEFORE_ANSWER = frozenset({"task.queued", "task.started", "llm.request", "memory.recall"})


def openai_calls(calls: list[ToolCall]) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in calls
    ]


def answer_message(text: str, answer: ClientAnswer) -> dict[str, Any]:
    """The assistant message of a completion: text, or (content null when none) tool calls."""
    if not answer.tool_calls:
        return {"role": "assistant", "content": text}
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": openai_calls(answer.tool_calls),
    }


def finish_reason(answer: ClientAnswer) -> str:
    return "tool_calls" if answer.tool_calls else "stop"


def tool_call_deltas(calls: list[ToolCall]) -> list[dict[str, Any]]:
    """One delta per call, each whole (index, id, type, name and arguments)."""
    return [{"tool_calls": [{"index": i, **call}]} for i, call in enumerate(openai_calls(calls))]


async def answer_of(core: OrchestratorCore, task: Task) -> ClientAnswer:
    return ClientAnswer.from_json(await core.openai_turns.answer(task.id))


def refusal_body(refusal: dict[str, Any]) -> dict[str, Any]:
    """The provider's error object as it sent it (message, type, code, param)."""
    error = {k: v for k, v in refusal.items() if k != "status"}
    error.setdefault("type", "invalid_request_error")
    error.setdefault("code", None)
    return {"error": error}


def refusal_response(refusal: dict[str, Any], headers: dict[str, str]) -> JSONResponse:
    return JSONResponse(refusal_body(refusal), int(refusal["status"]), headers=headers)


async def remember(core: OrchestratorCore, plan: TurnPlan, message: dict[str, Any]) -> None:
    """The session's conversation is now the request's messages and this answer."""
    digest = extend(plan.digests[-1] if plan.digests else START, message)
    await core.openai_turns.remember(plan.session_id, digest)


async def peeked(
    core: OrchestratorCore, task: Task
) -> tuple[list[StoredEvent], AsyncIterator[StoredEvent]]:
    """The task's events up to the first past BEFORE_ANSWER (or its end), and the rest."""
    events = core.tasks.follow(task.id, 0)
    seen: list[StoredEvent] = []
    async for event in events:
        seen.append(event)
        if event.type not in BEFORE_ANSWER:
            break
    return seen, events
