"""A /v1 turn's answer as the client sees it: the assistant message (text, or the calls of its
tools), its stream's tool-call chunks, the provider's refusal in OpenAI's error shape, and the
conversation the session remembers afterwards."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import JSONResponse

from orchestrator.agent.client_request import ClientAnswer
from orchestrator.agent.llm import ToolCall
from orchestrator.api.conversation import START, extend
from orchestrator.api.failed_turns import NO_RETRY, tools_note
from orchestrator.api.openai_request import TurnPlan
from orchestrator.core import OrchestratorCore
from orchestrator.store import StoredEvent
from orchestrator.store.turns import Turn

# Events a turn sends before its first LLM answer: a stream waits past them before it begins,
# so a refusal of the first request can still be answered with the provider's status.
BEFORE_ANSWER = frozenset({"task.queued", "task.started", "llm.request", "memory.recall"})
PEEK_SECONDS = 10.0


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


async def answer_of(core: OrchestratorCore, turn: Turn) -> ClientAnswer:
    """What the turn answered beyond its text; a provider's refusal keeps its words, with a note
    when tools had run before it."""
    answer = await core.client_answer(turn.id)
    note = tools_note(turn)
    if answer.refusal is not None and note:
        answer.refusal = {**answer.refusal, "message": f"{answer.refusal.get('message', '')}{note}"}
    return answer


def refusal_body(refusal: dict[str, Any]) -> dict[str, Any]:
    """The provider's error object as it sent it (message, type, code, param)."""
    error = {k: v for k, v in refusal.items() if k != "status"}
    error.setdefault("type", "invalid_request_error")
    error.setdefault("code", None)
    return {"error": error}


def refusal_response(refusal: dict[str, Any], headers: dict[str, str]) -> JSONResponse:
    """The provider's refusal with its status; no SDK retries it (api/failed_turns.py)."""
    status = int(refusal["status"])
    return JSONResponse(refusal_body(refusal), status, headers={**headers, **NO_RETRY})


async def remember(core: OrchestratorCore, plan: TurnPlan, message: dict[str, Any]) -> None:
    """The session's conversation is now the request's messages and this answer."""
    digest = extend(plan.digests[-1] if plan.digests else START, message)
    await core.remember_conversation(plan.session_id, digest)


class Peeked:
    """A turn's events read ahead, so a stream can wait for the turn's first LLM answer (at
    most PEEK_SECONDS: keep-alives only flow once it begins) before it sends its status."""

    def __init__(self, events: AsyncIterator[StoredEvent]):
        self.seen: list[StoredEvent] = []
        self._queue: asyncio.Queue[StoredEvent | None] = asyncio.Queue()
        self._ended = False
        self._reader = asyncio.create_task(self._read(events))

    async def _read(self, events: AsyncIterator[StoredEvent]) -> None:
        try:
            async for event in events:
                self._queue.put_nowait(event)
        finally:
            self._queue.put_nowait(None)

    async def wait(self, within: float = PEEK_SECONDS) -> StoredEvent | None:
        """The last event seen once one past BEFORE_ANSWER (or the end) came, or None."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                while (event := await self._queue.get()) is not None:
                    self.seen.append(event)
                    if event.type not in BEFORE_ANSWER:
                        return event
                self._ended = True
                return self.seen[-1] if self.seen else None
        return None

    async def events(self) -> AsyncIterator[StoredEvent]:
        """Every event of the turn, those seen first; stops reading when closed."""
        try:
            for seen in self.seen:
                yield seen
            while not self._ended and (event := await self._queue.get()) is not None:
                yield event
        finally:
            self._reader.cancel()
