"""LLM access: streamed replies (chat_http.py), restarts of a stream broken before any text,
a whole-reply deadline, usage, the preset that served each reply."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.agent.chat_http import (
    ChatEndpoint,
    EventStream,
    ProviderStatus,
    ProviderTimeout,
    ProviderUnreachable,
    StreamBroke,
)
from orchestrator.agent.fallback import Fallbacks
from orchestrator.agent.llm_error import LLMError
from orchestrator.agent.llm_record import (
    Gate,
    LLMRequestRecord,
    Recorder,
    RequestOrigin,
    price_of,
)
from orchestrator.agent.presets import ModelPreset
from orchestrator.agent.think import ThinkFilter, strip_think
from orchestrator.config import Settings

log = logging.getLogger(__name__)
__all__ = ["LLMClient", "LLMError", "LLMReply", "ToolCall", "add_usage"]

DeltaCallback = Callable[[str], Awaitable[None]]


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
    cached_tokens: int = 0  # of prompt_tokens, read from the provider's prompt cache
    model: str = ""  # the model that answered, as the provider names it
    preset: str = ""  # the model preset that served it (agent/presets.py)
    failed: list[str] = field(default_factory=list)  # the attempts that failed before it


@dataclass
class _StreamState:
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    finish_reason: str = ""
    usage: dict[str, Any] | None = None
    model: str = ""


@dataclass
class _Call:
    """One `complete` call: how much text reached the user, and the attempts so far."""

    on_delta: DeltaCallback | None
    more: bool = False  # another key or preset is left to try after this one
    shown: int = 0
    retries: list[float] = field(default_factory=list)
    restarts: int = 0

    async def show(self, text: str) -> None:
        if text and self.on_delta is not None:
            self.shown += len(text)
            await self.on_delta(text)

    @property
    def attempts(self) -> int:
        return 1 + len(self.retries) + self.restarts

    def gave_up(self) -> str:
        return f" (gave up after {self.attempts} attempts)" if self.attempts > 1 else ""


class LLMClient:
    """The model presets (agent/presets.py); `complete` asks the turn's preset, then its
    fallbacks and other keys (agent/fallback.py), streams when given a delta callback, and
    hands each request's record (preset, tokens, latency, price, error) to `recorder`."""

    def __init__(
        self, settings: Settings, recorder: Recorder | None = None, gate: Gate | None = None
    ):
        self.settings = settings
        self.keys = settings.model_keys
        self.presets = self.keys.current()
        self.fallbacks = Fallbacks(self.presets)
        self.recorder = recorder
        self.gate = gate
        # By preset and key: an endpoint of a key no longer in use stays until close (a request
        # may still be under way with it).
        self._endpoints: dict[tuple[str, str], ChatEndpoint] = {}

    async def close(self) -> None:
        for endpoint in self._endpoints.values():
            await endpoint.close()

    def _endpoint(self, preset: ModelPreset, key: int) -> ChatEndpoint:
        api_key = preset.keys[key] if key < len(preset.keys) else "not-needed"
        made = self._endpoints.get((preset.name, api_key))
        if made is None:
            made = self._endpoints[(preset.name, api_key)] = ChatEndpoint(
                preset.base_url,
                api_key,
                self.settings.llm_timeout,
                self.settings.llm_retries,
                self.settings.llm_retry_base_delay,
            )
        return made

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        on_delta: DeltaCallback | None = None,
        tool_choice: str | dict[str, Any] = "",
        params: dict[str, Any] | None = None,
        origin: RequestOrigin | None = None,
        model: str = "",
    ) -> LLMReply:
        """The whole reply from preset `model` (default: the default one) or a fallback; text
        goes to on_delta as it streams and is never sent twice. `params` (a client's
        temperature, stop, response_format...) go into the request as given: what the provider
        refuses is its to say. Each request to a preset, a failed one before a fallback too,
        is recorded as `origin` asked it; the gate may refuse any of them first (a budget
        used up mid-turn)."""
        asked = origin or RequestOrigin()
        self._use_current_keys()

        async def ask(preset: ModelPreset, key: int, more: bool) -> LLMReply:
            request = {
                **preset.params(),
                **(params or {}),
                **_request(preset.model, messages, tools, tool_choice),
            }
            return await self._recorded(asked, preset, key, request, _Call(on_delta, more=more))

        reply, preset, failed = await self.fallbacks.first_answer(model, ask)
        reply.preset, reply.failed = preset.name, [str(a) for a in failed]
        return reply

    def _use_current_keys(self) -> None:
        """The keys as CRAYFISH_MODEL_KEYS_FILE says now (one stat a second at most)."""
        presets = self.keys.current()
        if presets is not self.presets:
            self.fallbacks.use(presets)
            self.presets = presets

    async def _recorded(
        self,
        origin: RequestOrigin,
        preset: ModelPreset,
        key: int,
        request: dict[str, Any],
        call: _Call,
    ) -> LLMReply:
        """`_ask`, admitted by the gate first, and recorded whether it answered or failed."""
        if self.gate is not None:
            await self.gate(origin)
        started = time.perf_counter()
        try:
            reply = await self._ask(preset, key, request, call)
        except Exception as exc:
            await self._record(origin, preset, started, None, str(exc) or type(exc).__name__)
            raise
        await self._record(origin, preset, started, reply, "")
        return reply

    async def _record(
        self,
        origin: RequestOrigin,
        preset: ModelPreset,
        started: float,
        reply: LLMReply | None,
        error: str,
    ) -> None:
        """Hands the request's record to the recorder, priced at the preset's price; a failure
        to keep it costs the turn nothing (it is logged)."""
        if self.recorder is None:
            return
        prompt, completion, cached = (
            (reply.prompt_tokens, reply.completion_tokens, reply.cached_tokens)
            if reply
            else (0, 0, 0)
        )
        record = LLMRequestRecord(
            origin=origin,
            preset=preset.name,
            model=(reply.model if reply else "") or preset.model,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cached_tokens=cached,
            latency_ms=round((time.perf_counter() - started) * 1000, 1),
            price=price_of(preset.price, prompt, completion, cached),
            error=error,
        )
        try:
            await self.recorder(record)
        except Exception:
            log.exception("recording an LLM request failed")

    async def _ask(
        self, preset: ModelPreset, key: int, request: dict[str, Any], call: _Call
    ) -> LLMReply:
        """One preset and key, within CRAYFISH_LLM_DEADLINE; the LLMError knows what was shown."""
        deadline = self.settings.llm_deadline
        try:
            async with asyncio.timeout(deadline) as timer:
                return await self._attempts(self._endpoint(preset, key), request, call)
        except TimeoutError as exc:
            if not timer.expired():
                raise
            reason = f"the LLM reply did not finish within {deadline:g} s (CRAYFISH_LLM_DEADLINE)"
            if call.shown:
                reason += f", {call.shown} characters in"
            error = LLMError(reason + _partial(call.shown), timed_out=True)
            error.shown = call.shown
            raise error from exc
        except LLMError as exc:
            exc.shown = call.shown
            raise

    async def _attempts(
        self, endpoint: ChatEndpoint, request: dict[str, Any], call: _Call
    ) -> LLMReply:
        """Restarts a stream that broke before any text reached the user, at most
        CRAYFISH_LLM_RETRIES times (each new request has its retries again)."""
        while True:
            try:
                return await self._stream(endpoint, request, call)
            except StreamBroke as exc:
                if call.shown:
                    reason = f"the LLM stream broke after {call.shown} characters ({exc})"
                    raise LLMError(reason + _partial(call.shown)) from exc
                if call.restarts >= self.settings.llm_retries:
                    reason = f"the LLM stream broke before any text arrived ({exc})"
                    raise LLMError(reason + call.gave_up()) from exc
                call.restarts += 1
                log.warning("LLM stream broke before any text (%s); restarting it", exc)
                await asyncio.sleep(self.settings.llm_retry_base_delay * 2 ** (call.restarts - 1))

    async def _stream(
        self, endpoint: ChatEndpoint, request: dict[str, Any], call: _Call
    ) -> LLMReply:
        stream = await self._open(endpoint, request, call)
        state = _StreamState()
        think = ThinkFilter()
        try:
            async for chunk in stream:
                if not isinstance(chunk, dict):
                    raise StreamBroke(f"a chunk that is not a JSON object: {chunk!r:.80}")
                usage = chunk.get("usage")
                if isinstance(usage, dict):
                    state.usage = usage
                state.model = state.model or _str(chunk.get("model"))
                for choice in _dicts(chunk.get("choices")):
                    await call.show(_absorb(choice, state, think))
        finally:
            await stream.close()
        if not state.finish_reason:
            raise StreamBroke("the stream ended without a finish_reason")
        await call.show(think.flush())
        return _reply_from(state)

    async def _open(
        self, endpoint: ChatEndpoint, request: dict[str, Any], call: _Call
    ) -> EventStream:
        """The stream, once the retries got a response; failures become LLMError. With
        somewhere else to go (`call.more`), a timeout or a rate limit is not waited out here."""
        url = endpoint.url.removesuffix("/chat/completions")
        try:
            return await endpoint.stream(request, call.retries, elsewhere=call.more)
        except ProviderStatus as exc:
            reason = f"LLM answered HTTP {exc.status}: {exc.message}"
            if exc.retry_after:
                reason += f"; it asks to retry after {exc.retry_after} s"
            raise LLMError(reason + call.gave_up(), exc.status, exc.code) from exc
        except ProviderTimeout as exc:
            timeout = self.settings.llm_timeout
            reason = f"the LLM at {url} did not answer within {timeout:g} s (CRAYFISH_LLM_TIMEOUT)"
            raise LLMError(reason + call.gave_up(), timed_out=True) from exc
        except ProviderUnreachable as exc:
            raise LLMError(f"cannot reach the LLM at {url}: {exc}" + call.gave_up()) from exc


def _request(
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    choice: str | dict[str, Any],
) -> dict[str, Any]:
    request: dict[str, Any] = {"model": model, "messages": messages, "stream": True}
    request["stream_options"] = {"include_usage": True}
    if tools:
        request["tools"] = tools
        if isinstance(choice, dict) or choice in ("auto", "required", "none"):
            request["tool_choice"] = choice
        elif choice:
            request["tool_choice"] = {"type": "function", "function": {"name": choice}}
    return request


def _dicts(value: Any) -> list[dict[str, Any]]:
    """The JSON objects of a list a provider sent (anything else in it is ignored)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _absorb(choice: dict[str, Any], state: _StreamState, think: ThinkFilter) -> str:
    """Adds one choice's delta to state; returns the text that may be shown now."""
    if choice.get("finish_reason"):
        state.finish_reason = str(choice["finish_reason"])
    delta = choice.get("delta")
    if not isinstance(delta, dict):
        return ""
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    if isinstance(reasoning, str):
        state.reasoning.append(reasoning)
    for call in _dicts(delta.get("tool_calls")):
        given = call.get("index")
        index = given if isinstance(given, int) else len(state.calls)
        slot = state.calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        if call.get("id"):
            slot["id"] = _str(call["id"])
        function = call.get("function")
        if isinstance(function, dict):
            name = _str(function.get("name"))
            # OpenAI sends the name once; llama.cpp repeats it whole in every chunk.
            if name != slot["name"]:
                slot["name"] += name
            slot["arguments"] += _str(function.get("arguments"))
    content = delta.get("content")
    if not isinstance(content, str) or not content:
        return ""
    state.content.append(content)
    return think.feed(content)


def _reply_from(state: _StreamState) -> LLMReply:
    content, think_reasoning = strip_think("".join(state.content))
    reasoning = "".join(state.reasoning).strip() or think_reasoning
    calls = [
        ToolCall(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"])
        for i, c in sorted(state.calls.items())
    ]
    usage = state.usage or {}
    return LLMReply(
        content=content,
        reasoning=reasoning,
        tool_calls=calls,
        finish_reason=state.finish_reason,
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        cached_tokens=_cached_tokens(usage),
        model=state.model,
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def _cached_tokens(usage: dict[str, Any]) -> int:
    """`usage.prompt_tokens_details.cached_tokens` (OpenAI; DeepSeek's `prompt_cache_hit_tokens`
    too), 0 when the provider reports none."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return _int(cached if cached is not None else usage.get("prompt_cache_hit_tokens"))


def _partial(shown: int) -> str:
    return "; the unfinished answer shown was not kept: ask again" if shown else ""


def add_usage(usage: dict[str, int], reply: LLMReply) -> None:
    """Adds a reply's tokens to a turn's usage."""
    usage["prompt_tokens"] = usage.get("prompt_tokens", 0) + reply.prompt_tokens
    usage["completion_tokens"] = usage.get("completion_tokens", 0) + reply.completion_tokens
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    if reply.cached_tokens:
        usage["cached_prompt_tokens"] = usage.get("cached_prompt_tokens", 0) + reply.cached_tokens
