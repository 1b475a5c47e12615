"""The tool loop: ask the LLM, run the calls it makes, repeat until a final answer."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from crayfish_common.textcap import cap_text
from crayfish_common.tools import ToolResult
from crayfish_common.tracing import span
from opentelemetry import trace

from orchestrator.agent.client_request import ClientRequest
from orchestrator.agent.guard import RepeatGuard
from orchestrator.agent.llm import LLMClient, LLMReply, ToolCall, add_usage
from orchestrator.agent.llm_record import RequestOrigin
from orchestrator.agent.prompt import CAP_HEAD_SHARE, HEARTBEAT_TOKEN, SILENT_TOKEN
from orchestrator.agent.pseudo_calls import CallSniffer, find_pseudo_calls, strip_call_syntax
from orchestrator.agent.text_tools import to_text_protocol
from orchestrator.agent.tool_search import CallGate, TurnTools
from orchestrator.agent.tools import OfferedTool, ToolRegistry
from orchestrator.content.tool_images import ToolImages
from orchestrator.turns.events import EventSink

log = logging.getLogger(__name__)
tracer = trace.get_tracer("crayfish.orchestrator")

Persist = Callable[[list[dict[str, Any]]], Awaitable[None]]
# Messages for the model that arrived while the turn runs (a subagent's steering), read
# before each round after the first.
Inbox = Callable[[], Awaitable[list[str]]]

CORRECTIVE_NOTE = (
    "[Crayfish] Your last reply wrote a tool call as text, or named a tool that does not "
    "exist. To use a tool, make a real function call with one of the offered tools; otherwise "
    "answer the user in plain words."
)

SILENT_REPLIES = (SILENT_TOKEN, HEARTBEAT_TOKEN)
EMPTY_NOTE = (
    "[Crayfish] Your last reply was empty. Answer the user now, or reply NO_REPLY if there is "
    "truly nothing to say."
)
EMPTY_REPLY = "(The model returned an empty reply twice; try rephrasing the request.)"
REASK_NOTES = {"call written as text": CORRECTIVE_NOTE, "empty reply": EMPTY_NOTE}
UNUSABLE_REPLY = (
    "I could not complete this: the model kept writing tool calls as text instead of calling "
    "the tools. Try again, or use a model with function-calling support."
)


@dataclass
class LoopLimits:
    max_rounds: int = 15
    repeat_limit: int = 3
    result_max_chars: int = 40_000
    empty_content: str = "empty"
    first_tool_choice: str = ""
    tool_mode: str = "native"


@dataclass
class TurnOutcome:
    text: str
    rounds: int
    stopped: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    # Calls of the client's tools (ClientRequest): the turn ends and hands them over.
    client_calls: list[ToolCall] = field(default_factory=list)


class AgentLoop:
    """Runs one turn; `persist` receives each complete message group as it is final;
    `images` takes the images tool results name (None: their data is ignored)."""

    def __init__(
        self,
        llm: LLMClient,
        registry: ToolRegistry,
        limits: LoopLimits,
        images: ToolImages | None = None,
    ):
        self.llm = llm
        self.registry = registry
        self.limits = limits
        self.images = images

    async def run(
        self,
        messages: list[dict[str, Any]],
        session_id: str,
        emit: EventSink,
        persist: Persist,
        usage: dict[str, int],
        only: set[str] | None = None,
        client: ClientRequest | None = None,
        origin: RequestOrigin | None = None,
        gate: CallGate | None = None,
        model: str = "",
        inbox: Inbox | None = None,
    ) -> TurnOutcome:
        """Runs rounds until a final answer, or a call of a `client` tool; `only` restricts
        the tools offered and run; each LLM request is recorded as `origin` asked it; `gate` is
        asked before each call runs; `model`: the preset asked (default: the default one);
        `inbox`'s messages join as user messages between rounds."""
        origin = origin or RequestOrigin(session_id)
        guard = RepeatGuard(exact_limit=self.limits.repeat_limit)
        tools = TurnTools(self.registry, only, gate)  # grows when tool_search finds tools
        client = client or ClientRequest()
        reasked = False
        for round_no in range(1, self.limits.max_rounds + 1):
            if inbox is not None and round_no > 1:
                arrived = [{"role": "user", "content": text} for text in await inbox()]
                messages.extend(arrived)
                await persist(arrived)
            reply, streamed = await self._ask(
                messages, round_no, emit, usage, tools, client, origin, model
            )
            calls, content, note = reply.tool_calls, reply.content, ""
            if not calls:
                known = set(tools) | client.tool_names
                calls, content, note = self._read_text_reply(reply.content, known, reasked)
            if note:
                reasked = True
                await emit("llm.reask", {"round": round_no, "reason": note})
                messages.append({"role": "user", "content": REASK_NOTES[note]})
                continue
            if not calls:
                await self._finish_stream(content, streamed, round_no, emit)
                final = {"role": "assistant", "content": content}
                messages.append(final)
                await persist([final])
                return TurnOutcome(content, round_no, usage=usage)
            group, stop_reason = await self._run_calls(
                calls, content, session_id, guard, emit, tools, client.tool_names
            )
            # History keeps image references; this turn's requests carry the images.
            messages.extend(await self.images.for_llm(group) if self.images else group)
            await persist(group)
            handed = [c for c in calls if c.name in client.tool_names]
            if handed:
                return TurnOutcome(content, round_no, usage=usage, client_calls=handed)
            if stop_reason:
                return await self._stop(messages, persist, round_no, usage, stop_reason)
        reason = f"it reached the limit of {self.limits.max_rounds} tool rounds"
        return await self._stop(messages, persist, self.limits.max_rounds, usage, reason)

    def _read_text_reply(
        self, text: str, known: set[str], reasked: bool
    ) -> tuple[list[ToolCall], str, str]:
        """(calls recovered from text, the answer, why to re-ask instead: "" for no re-ask).

        Call-like text naming no offered tool, or an empty reply, is re-asked once; after
        that the user gets the prose without call syntax, or a clear message.
        """
        calls, content, looks_like_call = self._recover_calls(text, known)
        if calls:
            return calls, content, ""
        if looks_like_call:
            if not reasked:
                return [], content, "call written as text"
            content = strip_call_syntax(content) or UNUSABLE_REPLY
        if not content.strip():
            return ([], EMPTY_REPLY, "") if reasked else ([], content, "empty reply")
        return [], content, ""

    async def _finish_stream(
        self, content: str, streamed: str, round_no: int, emit: EventSink
    ) -> None:
        """Streams what the user has not seen yet of the final answer (held-back text)."""
        done = streamed.lstrip()
        if content.startswith(done) and content.strip() not in SILENT_REPLIES:
            rest = content[len(done) :]
            if rest:
                await emit("assistant.delta", {"round": round_no, "text": rest})

    async def _ask(
        self,
        messages: list[dict[str, Any]],
        round_no: int,
        emit: EventSink,
        usage: dict[str, int],
        tools: Mapping[str, OfferedTool],
        client: ClientRequest,
        origin: RequestOrigin,
        model: str,
    ) -> tuple[LLMReply, str]:
        """The reply, and the text already streamed to the user as deltas."""
        asked = self.llm.presets.chosen(model).name
        await emit("llm.request", {"round": round_no, "messages": len(messages), "model": asked})
        sniffer = CallSniffer(SILENT_REPLIES)

        async def on_delta(text: str) -> None:
            visible = sniffer.feed(text)
            if visible:
                await emit("assistant.delta", {"round": round_no, "text": visible})

        started = time.perf_counter()
        with span(tracer, "llm", {"crayfish.round": round_no}) as llm_span:
            if self.limits.tool_mode == "text":
                text_protocol = to_text_protocol(messages)
                reply = await self.llm.complete(
                    text_protocol, None, on_delta, "", client.params, origin, model
                )
            else:
                offered = [t.as_openai() for t in tools.values()] + client.tools
                choice = client.tool_choice or self._first_choice(round_no, tools)
                reply = await self.llm.complete(
                    messages, offered or None, on_delta, choice, client.params, origin, model
                )
            llm_span.set_attributes(
                {
                    "gen_ai.usage.input_tokens": reply.prompt_tokens,
                    "gen_ai.usage.output_tokens": reply.completion_tokens,
                    "crayfish.cached_tokens": reply.cached_tokens,
                    "crayfish.tool_calls": len(reply.tool_calls),
                    "gen_ai.request.model": reply.preset,
                }
            )
        add_usage(usage, reply)
        await emit(
            "llm.response",
            {
                "round": round_no,
                "model": reply.preset,
                "fallbacks": reply.failed,
                "finish_reason": reply.finish_reason,
                "tool_calls": [c.name for c in reply.tool_calls],
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "cached_tokens": reply.cached_tokens,
                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
            },
        )
        return reply, sniffer.seen

    def _first_choice(self, round_no: int, tools: Mapping[str, OfferedTool]) -> str:
        choice = self.limits.first_tool_choice if round_no == 1 else ""
        if choice not in ("", "auto", "required", "none") and choice not in tools:
            return ""  # forcing a tool this turn does not offer would be rejected
        return choice

    def _recover_calls(self, content: str, known: set[str]) -> tuple[list[ToolCall], str, bool]:
        """(calls recovered from text, remaining prose, whether call syntax went unrecovered)."""
        found, looks_like_call = find_pseudo_calls(content, known)
        if found:
            calls = [
                ToolCall(f"call_{uuid.uuid4().hex[:12]}", c.name, json.dumps(c.arguments))
                for c in found
            ]
            return calls, strip_call_syntax(content), False
        return [], content, looks_like_call

    async def _run_calls(
        self,
        calls: list[ToolCall],
        content: str,
        session_id: str,
        guard: RepeatGuard,
        emit: EventSink,
        tools: TurnTools,
        handed: frozenset[str] = frozenset(),
    ) -> tuple[list[dict[str, Any]], str]:
        """The message group of a round: its calls, and the results of those Crayfish runs
        (the `handed` tools' calls are the client's to answer)."""
        own = [c for c in calls if c.name not in handed]
        outcomes = await asyncio.gather(*(self._run_one(c, session_id, emit, tools) for c in own))
        stop_reason = ""
        for call, outcome in zip(own, outcomes, strict=True):
            reason = guard.check(call.name, call.arguments, outcome.output)
            stop_reason = stop_reason or (reason or "")
        assistant = {
            "role": "assistant",
            "content": content or (None if self.limits.empty_content == "null" else ""),
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in calls
            ],
        }
        shown = await self._attach_images(own, outcomes, len(own) < len(calls))
        results = [
            {"role": "tool", "tool_call_id": c.id, "content": o.output}
            for c, o in zip(own, outcomes, strict=True)
        ]
        return [assistant, *results, *shown], stop_reason

    async def _attach_images(
        self, calls: list[ToolCall], outcomes: list[ToolResult], handed: bool
    ) -> list[dict[str, Any]]:
        """The user message showing the images the results name (their notes added to the
        results). Not when the client answers some calls: its results must follow the calls."""
        if self.images is None or handed:
            return []
        named = [(c.name, c.id, o) for c, o in zip(calls, outcomes, strict=True)]
        return await self.images.attach(named)

    async def _run_one(
        self, call: ToolCall, session_id: str, emit: EventSink, tools: TurnTools
    ) -> ToolResult:
        await emit(
            "tool.started", {"call_id": call.id, "tool": call.name, "arguments": call.arguments}
        )
        started = time.perf_counter()

        async def on_output(stream: str, text: str) -> None:
            data = {"call_id": call.id, "tool": call.name, "stream": stream, "text": text}
            await emit("tool.output", data)

        with span(tracer, f"tool {call.name}", {"crayfish.call_id": call.id}) as tool_span:
            outcome = await tools.run(call.name, call.arguments, session_id, call.id, on_output)
            tool_span.set_attribute("crayfish.ok", outcome.ok)
        capped = cap_text(outcome.output, self.limits.result_max_chars, CAP_HEAD_SHARE)
        truncated = outcome.truncated or capped.truncated
        outcome.output = capped.text
        await emit(
            "tool.finished",
            {
                "call_id": call.id,
                "tool": call.name,
                "ok": outcome.ok,
                "exit_code": outcome.exit_code,
                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                "truncated": truncated,
                "output": capped.text[:2000],
            },
        )
        return outcome

    async def _stop(
        self,
        messages: list[dict[str, Any]],
        persist: Persist,
        rounds: int,
        usage: dict[str, int],
        reason: str,
    ) -> TurnOutcome:
        text = (
            f"I stopped working on this because {reason}, which looks like a loop that would "
            "not finish. Tell me how you would like to continue, or rephrase the request."
        )
        final = {"role": "assistant", "content": text}
        messages.append(final)
        await persist([final])
        return TurnOutcome(text, rounds, stopped=reason, usage=usage)
