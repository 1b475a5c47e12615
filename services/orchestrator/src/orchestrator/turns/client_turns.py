"""A turn asked through the OpenAI-compatible API (turn kind "openai"): a chat turn that also
carries the client's instructions, sampling parameters, tools and tool results, and that ends
early when the model calls one of the client's tools (the client runs it and sends the result
in its next request, which continues the turn's conversation)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from orchestrator.agent.chat_http import RETRY_STATUSES, ProviderStatus
from orchestrator.agent.client_request import (
    ClientAnswer,
    ClientRequest,
    close_unanswered,
    pending_calls,
)
from orchestrator.agent.llm import LLMError
from orchestrator.agent.prompt import with_client_instructions
from orchestrator.agent.turn_context import turn_context, with_turn_context
from orchestrator.content.assistant import Assistant, system_message
from orchestrator.content.media import user_content, vision_refusal
from orchestrator.store.openai_turns import OpenAITurnStore
from orchestrator.store.turns import Turn
from orchestrator.turns.events import EventSink

log = logging.getLogger(__name__)

KIND = "openai"
LATE_RESULT = "[Crayfish] The client's tool sent this result after the conversation went on; call"


class ClientTurns:
    """Runs the turns of /v1 requests with the assistant's parts."""

    def __init__(self, assistant: Assistant, store: OpenAITurnStore):
        self.assistant = assistant
        self.store = store

    async def run(self, turn: Turn, emit: EventSink) -> str:
        request = ClientRequest.from_json(await self.store.request(turn.id))
        try:
            text, rounds, answer = await self._converse(turn, emit, request)
        except LLMError as exc:
            refusal = provider_refusal(exc)
            if refusal is not None:  # the client gets the provider's words and status
                await self.store.put_answer(turn.id, ClientAnswer(refusal=refusal).as_json())
            raise
        if answer.tool_calls:
            await self.store.put_answer(turn.id, answer.as_json())
        return await self.assistant.deliver(text, rounds, turn, emit)

    async def _converse(
        self, turn: Turn, emit: EventSink, request: ClientRequest
    ) -> tuple[str, int, ClientAnswer]:
        a = self.assistant
        if turn.images and not a.vision:
            raise ValueError(vision_refusal(a.settings))
        system, recall = await asyncio.gather(a.system_prompt("full"), a.recall(turn.message, emit))
        system = with_client_instructions(system, request.instructions)
        pending = pending_calls(await a.store.load(turn.session_id))
        answers = request.answers(pending)
        late = {i: r for i, r in request.tool_results.items() if i not in pending}
        user = self._user_message(turn, recall, late)
        incoming = answers + ([user] if user else [])
        history = await a.turns.accept_group(turn, incoming)
        if user:  # a continuation with tool results only is compacted at the next message
            history = await a.compactor.fit(
                turn.session_id,
                system,
                [*history, *answers],
                user,
                emit,
                turn.usage,
                turn.id,
                turn.model,
            )
        else:
            history = [*history, *answers]
        history = close_unanswered(history)  # a message from elsewhere came before a result
        messages = [system_message(system), *history, *([user] if user else [])]
        outcome = await a.run_loop(turn, emit, messages, client=request)
        return outcome.text, outcome.rounds, ClientAnswer(outcome.client_calls)

    def _user_message(self, turn: Turn, recall: str, late: dict[str, str]) -> dict[str, Any] | None:
        """The turn's message, after the results of calls the conversation went past (a
        message came from elsewhere first), with the turn context at its end; None for tool
        results only."""
        text = "\n\n".join(
            [f"{LATE_RESULT} {call_id}:\n{result}" for call_id, result in late.items()]
            + ([turn.message] if turn.message else [])
        )
        if not text and not turn.images:
            return None
        context = turn_context(self.assistant.settings.timezone, recall)
        return {
            "role": "user",
            "content": user_content(with_turn_context(text, context), turn.images),
        }


def provider_refusal(exc: LLMError) -> dict[str, Any] | None:
    """The provider's refusal behind an LLM error ({"status", "message", type, code, param}):
    a 4xx a client would not retry (not 408, 409 or 429); None for any other failure. Not 401
    or 403 either: those refuse Crayfish's own key, and api/failed_turns.py says so (424)
    rather than make the client think its token was wrong."""
    cause = exc.__cause__
    if not isinstance(cause, ProviderStatus):
        return None
    if not 400 <= cause.status < 500 or cause.status in (*RETRY_STATUSES, 401, 403):
        return None
    return {"status": cause.status, "message": cause.message, **cause.details}
