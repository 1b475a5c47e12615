"""Keeps a session within its token budget: prune, flush memory, then summarise old turns (or
reuse the summary the session got when it was last idle, consolidation/idle.py)."""

from __future__ import annotations

import logging
from typing import Any

from crayfish_common.textcap import cap_text

from orchestrator.agent.context import (
    compaction_split,
    estimate_text,
    estimate_tokens,
    prune_tool_results,
)
from orchestrator.agent.llm import LLMClient, add_usage
from orchestrator.agent.llm_record import COMPACTION, RequestOrigin
from orchestrator.agent.loop import AgentLoop
from orchestrator.content.media import as_text_only, plain_text
from orchestrator.store.sessions import SessionStore
from orchestrator.store.summaries import SummaryStore
from orchestrator.turns.events import EventSink

log = logging.getLogger(__name__)

# Room left for the model's answer and the turn's own tool results.
BUDGET_SHARE = 0.7
KEEP_TURNS = 3
FLUSH_TOOLS = {"memory_write", "memory_search"}
FLUSH_PROMPT = (
    "[Crayfish] The conversation above is about to be compacted into a short summary. Before "
    "that happens, save any durable facts worth keeping (decisions, preferences, people, dates, "
    "todos) with `memory_write`, one short note per fact. Do not repeat what memory already "
    "has. When done, or if there is nothing to save, reply exactly NO_REPLY."
)
SUMMARY_PROMPT = (
    "Summarise the conversation below for the assistant's own later use. Keep every decision, "
    "fact about the user, open task, file path and command result that may matter later; drop "
    "chit-chat. Write plain prose and short lists, at most 300 words."
)
VISIBLE_DURING_FLUSH = {"tool.started", "tool.finished"}


class Compactor:
    """Fits history into the budget; persists a compaction so it is done once, not per turn."""

    def __init__(
        self,
        llm: LLMClient,
        loop: AgentLoop,
        store: SessionStore,
        context_tokens: int,
        summaries: SummaryStore | None = None,
    ) -> None:
        self.llm = llm
        self.loop = loop
        self.store = store
        self.context_tokens = context_tokens
        self.summaries = summaries

    def budget(self, system: str, model: str = "") -> int:
        window = self.llm.presets.chosen(model).context_window or self.context_tokens
        return int(window * BUDGET_SHARE) - estimate_text(system)

    async def fit(
        self,
        session_id: str,
        system: str,
        history: list[dict[str, Any]],
        incoming: dict[str, Any],
        emit: EventSink,
        usage: dict[str, int],
        task_id: str = "",
        model: str = "",
    ) -> list[dict[str, Any]]:
        """History to send with `incoming`: as is, pruned, or compacted (and persisted), by
        the context window of preset `model` (its own, else CRAYFISH_CONTEXT_TOKENS); the
        requests this makes are recorded as `task_id`'s compaction."""
        budget = self.budget(system, model)
        if estimate_tokens([*history, incoming]) <= budget:
            return history
        pruned, count = prune_tool_results(history, KEEP_TURNS)
        if count:
            await emit("context.pruned", {"tool_results": count})
        if estimate_tokens([*pruned, incoming]) <= budget:
            return pruned
        # Compact down to half the budget, so the next turns do not compact again at once.
        cut = compaction_split([*pruned, incoming], budget // 2)
        if cut <= 0:
            return pruned
        summary = await self._kept_summary(session_id, len(history), cut)
        origin = RequestOrigin(session_id, task_id, COMPACTION)
        await self._flush_memory(origin, system, pruned[:cut], emit, usage, model)
        if not summary:
            summary = await summarise(self.llm, history[:cut], usage, origin, model)
        await self.store.append_compaction(session_id, summary, cut)
        compacted = await self.store.load(session_id)
        # The current user message was persisted before this ran; it is sent separately.
        if compacted and compacted[-1].get("role") == "user":
            compacted = compacted[:-1]
        await emit(
            "context.compacted",
            {"replaced_messages": cut, "tokens_before": estimate_tokens(history)},
        )
        return prune_tool_results(compacted, KEEP_TURNS)[0]

    async def _flush_memory(
        self,
        origin: RequestOrigin,
        system: str,
        old: list[dict[str, Any]],
        emit: EventSink,
        usage: dict[str, int],
        model: str,
    ) -> None:
        """A silent turn in which the model may save durable facts before they are summarised."""
        if not FLUSH_TOOLS & set(self.loop.registry.tools):
            return
        # Images are named, not shown, to the flush turn: it saves facts from the text.
        messages = [{"role": "system", "content": system}, *as_text_only(old)]
        messages.append({"role": "user", "content": FLUSH_PROMPT})

        async def quiet(type_: str, data: dict[str, Any]) -> None:
            if type_ in VISIBLE_DURING_FLUSH:
                await emit(type_, {**data, "phase": "memory_flush"})

        await emit("memory.flush", {"messages": len(old)})
        try:
            await self.loop.run(
                messages,
                origin.session_id,
                quiet,
                _discard,
                usage,
                FLUSH_TOOLS,
                origin=origin,
                model=model,
            )
        except Exception as exc:  # a failed flush must not lose the user's turn
            log.warning("memory flush failed: %s", exc)

    async def _kept_summary(self, session_id: str, length: int, cut: int) -> str:
        """The session's idle summary when it stands for at least the first `cut` of its
        `length` messages (it may tell of turns kept verbatim too: a few words twice cost less
        than an LLM call); else "" and the old messages are summarised now."""
        if self.summaries is None:
            return ""
        kept = await self.summaries.reusable(session_id, length)
        return kept.summary if kept is not None and kept.messages >= cut else ""


async def summarise(
    llm: LLMClient,
    messages: list[dict[str, Any]],
    usage: dict[str, int],
    origin: RequestOrigin,
    model: str,
    earlier: str = "",
    max_chars: int = 0,
) -> str:
    """The model's summary of `messages` (after the `earlier` summary of what came before),
    their transcript cut to `max_chars` (head and tail; 0: whole)."""
    text = cap_text(transcript(messages), max_chars).text
    if earlier:
        text = f"[Summary of what came before]\n{earlier}\n\n[The conversation since]\n{text}"
    request = [
        {"role": "system", "content": SUMMARY_PROMPT},
        {"role": "user", "content": text},
    ]
    reply = await llm.complete(request, origin=origin, model=model)
    add_usage(usage, reply)
    return reply.content.strip() or "(the earlier conversation had nothing worth keeping)"


async def _discard(group: list[dict[str, Any]]) -> None:
    """The flush turn's messages are not part of the session."""


def transcript(messages: list[dict[str, Any]], max_chars_each: int = 2000) -> str:
    """Plain-text rendering of messages, so summarising never sends tool groups; an image
    is `[image: path]`."""
    lines = []
    for message in messages:
        role = message.get("role", "?")
        content = plain_text(message.get("content"))[:max_chars_each]
        if message.get("tool_calls"):
            calls = ", ".join(c["function"]["name"] for c in message["tool_calls"])
            content = f"{content} [called: {calls}]".strip()
        lines.append(f"{role}: {content}")
    return "\n".join(lines)
