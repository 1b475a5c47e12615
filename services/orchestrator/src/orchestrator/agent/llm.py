"""LLM access through the openai SDK: streaming, retries with backoff and jitter, usage."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import openai
from openai import AsyncOpenAI

from orchestrator.agent.think import ThinkFilter, strip_think
from orchestrator.config import Settings

log = logging.getLogger(__name__)

DeltaCallback = Callable[[str], Awaitable[None]]
RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}


class LLMError(Exception):
    """The provider failed in a way retries did not fix; the message is safe to show."""


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass
class LLMReply:
    content: str
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class _StreamState:
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    finish_reason: str = ""
    usage: Any = None


class LLMClient:
    """One provider, one model; `complete` streams when given a delta callback."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.model = settings.model
        self.client = AsyncOpenAI(
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key or "not-needed",
            timeout=settings.llm_timeout,
            max_retries=0,
        )

    async def close(self) -> None:
        await self.client.close()

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        on_delta: DeltaCallback | None = None,
        tool_choice: str = "",
    ) -> LLMReply:
        attempt = 0
        while True:
            try:
                return await self._stream(messages, tools, on_delta, tool_choice)
            except (openai.APIConnectionError, openai.APITimeoutError) as exc:
                reason = f"cannot reach the LLM at {self.settings.openai_base_url}: {exc}"
            except openai.APIStatusError as exc:
                reason = f"LLM answered HTTP {exc.status_code}: {_error_message(exc)}"
                if exc.status_code not in RETRYABLE_STATUS:
                    raise LLMError(reason) from exc
            attempt += 1
            if attempt > self.settings.llm_retries:
                raise LLMError(f"{reason} (gave up after {attempt} attempts)")
            delay = self.settings.llm_retry_base_delay * 2 ** (attempt - 1)
            delay *= 0.5 + random.random()
            log.warning("LLM call failed (%s); retry %d in %.2fs", reason, attempt, delay)
            await asyncio.sleep(delay)

    async def _stream(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        on_delta: DeltaCallback | None,
        tool_choice: str,
    ) -> LLMReply:
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "stream": True}
        kwargs["stream_options"] = {"include_usage": True}
        if tools:
            kwargs["tools"] = tools
            if tool_choice in ("auto", "required", "none"):
                kwargs["tool_choice"] = tool_choice
            elif tool_choice:
                kwargs["tool_choice"] = {"type": "function", "function": {"name": tool_choice}}
        state = _StreamState()
        think = ThinkFilter()
        stream = await self.client.chat.completions.create(**kwargs)
        async for chunk in stream:
            if chunk.usage is not None:
                state.usage = chunk.usage
            for choice in chunk.choices:
                await self._absorb(choice, state, think, on_delta)
        tail = think.flush()
        if tail and on_delta is not None:
            await on_delta(tail)
        return _reply_from(state)

    async def _absorb(
        self, choice: Any, state: _StreamState, think: ThinkFilter, on_delta: DeltaCallback | None
    ) -> None:
        delta = choice.delta
        if choice.finish_reason:
            state.finish_reason = choice.finish_reason
        if delta is None:
            return
        reasoning = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
        if isinstance(reasoning, str):
            state.reasoning.append(reasoning)
        if delta.content:
            state.content.append(delta.content)
            visible = think.feed(delta.content)
            if visible and on_delta is not None:
                await on_delta(visible)
        for call in delta.tool_calls or []:
            slot = state.calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
            if call.id:
                slot["id"] = call.id
            if call.function is not None:
                name = call.function.name or ""
                # OpenAI sends the name once; llama.cpp repeats it whole in every chunk.
                if name != slot["name"]:
                    slot["name"] += name
                slot["arguments"] += call.function.arguments or ""


def _reply_from(state: _StreamState) -> LLMReply:
    content, think_reasoning = strip_think("".join(state.content))
    reasoning = "".join(state.reasoning).strip() or think_reasoning
    calls = [
        ToolCall(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"])
        for i, c in sorted(state.calls.items())
    ]
    usage = state.usage
    return LLMReply(
        content=content,
        reasoning=reasoning,
        tool_calls=calls,
        finish_reason=state.finish_reason,
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
    )


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return str(exc.message)
