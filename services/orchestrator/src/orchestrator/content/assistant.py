"""One chat turn: prompt, memory recall, history, the tool loop, delivery rules."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from crayfish_common.tracing import span
from crayfish_common.url_guard import AllowList
from opentelemetry import trace

from orchestrator.agent.client_request import ClientRequest, close_unanswered
from orchestrator.agent.compaction import Compactor
from orchestrator.agent.context import last_turns
from orchestrator.agent.llm import LLMClient
from orchestrator.agent.llm_record import RequestOrigin
from orchestrator.agent.loop import AgentLoop, LoopLimits, TurnOutcome
from orchestrator.agent.prompt import (
    BOOTSTRAP_FILES,
    MINIMAL_FILES,
    SILENT_TOKEN,
    PromptInputs,
    PromptMode,
    build_system_prompt,
)
from orchestrator.agent.small_talk import is_small_talk
from orchestrator.agent.tool_search import CallGate, initial_offer
from orchestrator.agent.tools import ToolRegistry
from orchestrator.agent.turn_context import chat_note, turn_context, with_turn_context
from orchestrator.approvals.desk import ApprovalDesk
from orchestrator.approvals.gate import CHANNEL_KIND, ExecGate, is_outside
from orchestrator.clients import ServiceClients, ServiceError, ToolServiceClient
from orchestrator.clients.memory import MemoryHit
from orchestrator.config import Settings
from orchestrator.content.media import (
    MediaStore,
    for_llm,
    user_content,
    vision_enabled,
    vision_refusal,
)
from orchestrator.content.tool_images import ToolImages
from orchestrator.content.workspace import WorkspaceFile, WorkspaceFiles
from orchestrator.schedules.heartbeat import is_acknowledgement
from orchestrator.store import SessionStore, TurnStore
from orchestrator.store.summaries import SummaryStore
from orchestrator.store.turns import Turn
from orchestrator.turns.events import EventSink

if TYPE_CHECKING:
    from orchestrator.content.own_tools import OwnTools

log = logging.getLogger(__name__)
tracer = trace.get_tracer("crayfish.orchestrator")


class Assistant:
    """Everything a turn needs, built once per app and shared by all tasks."""

    def __init__(
        self,
        settings: Settings,
        clients: ServiceClients,
        llm: LLMClient,
        store: SessionStore,
        turns: TurnStore,
        own_tools: OwnTools | None = None,
        approvals: ApprovalDesk | None = None,
    ):
        self.settings = settings
        self.approvals = approvals  # None: no exec is checked (the tool-runner's policy only)
        self.clients = clients
        self.llm = llm
        self.store = store
        self.turns = turns
        # The orchestrator's own tools (schedules, notify) rank right after the built-in
        # services: a connector or custom tool cannot take their names.
        # They answer the registry's calls as a service client does.
        own = cast(list[ToolServiceClient], [own_tools] if own_tools else [])
        builtin = [*clients.builtin, *own]
        self.registry = ToolRegistry(
            [*builtin, *clients.tool_services[len(clients.builtin) :]],
            settings.tool_timeout,
            search_threshold=settings.tool_search_threshold,
            always_offered=frozenset(c.name for c in builtin),
        )
        self.workspace = WorkspaceFiles(settings.workspace)
        self.media = MediaStore(
            settings.data_dir,
            settings.image_max_bytes,
            settings.images_per_message,
            AllowList.parse(settings.web_fetch_allow),
            max_per_request=settings.images_per_request,
            max_total=settings.media_max_bytes,
        )
        self.vision = vision_enabled(settings)
        self.loop = AgentLoop(
            llm,
            self.registry,
            LoopLimits(
                max_rounds=settings.max_rounds,
                repeat_limit=settings.repeat_limit,
                result_max_chars=settings.tool_result_max_chars,
                empty_content=settings.llm_empty_content,
                first_tool_choice=settings.llm_first_tool_choice,
                tool_mode=settings.llm_tool_mode,
            ),
            ToolImages(settings.workspace, self.media, self.vision),
        )
        self.compactor = Compactor(
            llm, self.loop, store, settings.context_tokens, SummaryStore(store.db)
        )
        # A line on the session for its turn's context (subagents/: the children at work).
        self.session_note: Callable[[str], Awaitable[str]] = _no_note

    async def run_chat(self, turn: Turn, emit: EventSink) -> str:
        text, rounds = await self._converse(turn, emit)
        return await self.deliver(text, rounds, turn, emit)

    async def run_scheduled(self, turn: Turn, emit: EventSink) -> str:
        """A schedule's turn in its session: as a chat turn, but light (the background prompt,
        the session's last few turns), and an acknowledgement (HEARTBEAT_OK) or NO_REPLY is
        not delivered."""
        settings = self.settings
        text, rounds = await self._converse(
            turn, emit, settings.background_prompt, settings.background_history_turns
        )
        if is_acknowledgement(text):
            turn.delivered = False
            text = ""
        return await self.deliver(text, rounds, turn, emit)

    async def _converse(
        self, turn: Turn, emit: EventSink, mode: PromptMode = "full", keep_turns: int | None = None
    ) -> tuple[str, int]:
        """The turn with the session's history (its last `keep_turns` turns, when given),
        memory recall and the tool loop."""
        if turn.images and not self.vision:
            raise ValueError(vision_refusal(self.settings))
        with span(tracer, "turn setup"):
            system, recall, note = await asyncio.gather(
                self.system_prompt(mode),
                self.recall(turn.message, emit),
                self.session_note(turn.session_id),
            )
            chat = chat_note(turn.session_id.partition(".")[0]) if turn.kind == CHANNEL_KIND else ""
            notes = "\n\n".join(filter(None, [chat, note, recall]))
            history, user = await self._accept(turn, notes)
            if keep_turns is not None:
                history = last_turns(history, keep_turns)
            history = await self.compactor.fit(
                turn.session_id, system, history, user, emit, turn.usage, turn.id, turn.model
            )
        history = close_unanswered(history)
        return await self._loop(turn, emit, [system_message(system), *history, user])

    async def run_heartbeat(self, turn: Turn, emit: EventSink) -> str:
        """A light turn: the background prompt, the standing tasks and no history; an
        acknowledgement is dropped."""
        system = await self.system_prompt(self.settings.background_prompt)
        _, user = await self._accept(turn, history=False)
        text, rounds = await self._loop(turn, emit, [system_message(system), user])
        if is_acknowledgement(text):
            turn.delivered = False
            text = ""
        return await self.deliver(text, rounds, turn, emit)

    async def run_upkeep(self, turn: Turn, emit: EventSink, tools: frozenset[str]) -> str:
        """A background turn that tends memory (consolidation): the minimal prompt, no history,
        only `tools`; its answer stays with the turn and is never delivered."""
        system = await self.system_prompt("minimal")
        _, user = await self._accept(turn, history=False)
        outcome = await self.run_loop(turn, emit, [system_message(system), user], only=tools)
        turn.delivered = False
        return await self.deliver(outcome.text, outcome.rounds, turn, emit)

    async def _accept(
        self, turn: Turn, recall: str = "", history: bool = True
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Persists the turn's message, with the turn context (time, recall) at its end, as the
        session's next user message: later turns re-send exactly these bytes (a provider's
        prompt cache holds). From here on the turn has side effects, so a crash ends it as
        interrupted instead of running it again. Returns (the history before it, when asked
        for, and it)."""
        context = turn_context(self.settings.timezone, recall)
        user = {
            "role": "user",
            "content": user_content(with_turn_context(turn.message, context), turn.images),
        }
        before = await self.turns.accept(turn, user, load=history)
        return before, user

    async def _loop(
        self, turn: Turn, emit: EventSink, messages: list[dict[str, Any]]
    ) -> tuple[str, int]:
        outcome = await self.run_loop(turn, emit, messages)
        return outcome.text, outcome.rounds

    async def run_loop(
        self,
        turn: Turn,
        emit: EventSink,
        messages: list[dict[str, Any]],
        client: ClientRequest | None = None,
        only: frozenset[str] | None = None,
    ) -> TurnOutcome:
        """The tool loop over `messages` (images as the model takes them), each group kept
        with the turn; `client`: what a /v1 client asked of it (its tools, parameters);
        `only`: the tools it may call (None: all)."""
        return await self.loop.run(
            await for_llm(messages, self.media, self.vision),
            turn.session_id,
            emit,
            lambda group: self.turns.append_turn(turn, group),
            turn.usage,
            only=set(only) if only is not None else None,
            client=client,
            origin=origin_of(turn),
            gate=self.gate(turn, emit),
            model=turn.model,
        )

    def gate(self, turn: Turn, emit: EventSink, sandbox_session: str = "") -> CallGate | None:
        """The approval check of the turn's calls; a subagent's sandbox is its parent's."""
        if self.approvals is None:
            return None
        outside = is_outside(turn.kind, sandbox_session or turn.session_id)
        return ExecGate(self.approvals, turn.id, turn.session_id, emit, outside).check

    async def deliver(self, text: str, rounds: int, turn: Turn, emit: EventSink) -> str:
        if text.strip() == SILENT_TOKEN:
            turn.delivered = False
            text = ""
        await emit(
            "assistant.message", {"text": text, "delivered": turn.delivered, "rounds": rounds}
        )
        return text

    async def system_prompt(self, mode: PromptMode, hidden: frozenset[str] = frozenset()) -> str:
        """The system prompt (`hidden`: tools not offered); the tool registry (cached for a few
        seconds), the skills prompt and the bootstrap files are fetched at once."""
        context_files: list[WorkspaceFile] = []
        if mode == "none":
            await self.registry.refresh()
            skills_xml, always = "", ""
        elif mode == "minimal":
            _, context_files = await asyncio.gather(
                self.registry.refresh(), self.workspace.load(MINIMAL_FILES)
            )
            skills_xml, always = "", ""
        else:
            _, (skills_xml, always), context_files = await asyncio.gather(
                self.registry.refresh(),
                self._skills_prompt(),
                self.workspace.load(BOOTSTRAP_FILES),
            )
        offered = [t for t in initial_offer(self.registry) if t.name not in hidden]
        return build_system_prompt(
            PromptInputs(
                agent_name=self.settings.agent_name,
                model=self.settings.model,
                context_files=context_files,
                tools=[(t.name, t.description) for t in offered],
                text_tools=[(t.name, t.description, t.parameters) for t in offered]
                if self.settings.llm_tool_mode == "text"
                else [],
                skills_xml=skills_xml,
                always_skills=always,
                mode=mode,
                file_max_chars=self.settings.bootstrap_max_chars,
                total_max_chars=self.settings.bootstrap_total_max_chars,
                timezone=self.settings.timezone,
            )
        )

    async def _skills_prompt(self) -> tuple[str, str]:
        try:
            prompt = await self.clients.skills.skills_prompt()
        except ServiceError as exc:
            log.warning("skills prompt unavailable: %s", exc.status)
            return "", ""
        return prompt.xml, prompt.always_bodies

    async def recall(self, query: str, emit: EventSink) -> str:
        """Best memory hits for the user's message, as a context block with citations."""
        if not self.settings.auto_recall or not query.strip():
            return ""
        if self.settings.auto_recall_skip_small_talk and is_small_talk(query):
            return ""
        try:
            with span(tracer, "memory recall"):
                found = await self.clients.memory.search(
                    query,
                    top_k=self.settings.auto_recall_hits,
                    min_score=self.settings.auto_recall_min_score,
                )
        except ServiceError as exc:
            log.warning("auto-recall skipped: %s", exc)
            return ""
        if not found.hits:
            return ""
        await emit("memory.recall", {"citations": [hit.citation for hit in found.hits]})
        return format_recall(found.hits)


async def _no_note(session_id: str) -> str:
    return ""


def origin_of(turn: Turn) -> RequestOrigin:
    """How a turn's LLM requests are recorded: its session, id and kind."""
    return RequestOrigin(turn.session_id, turn.id, turn.kind)


def system_message(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def format_recall(hits: list[MemoryHit]) -> str:
    lines = [
        "[Memory recall: notes that may be relevant; cite them as `Source: path#Lx-Ly` if used]"
    ]
    for hit in hits:
        lines.append(f"Source: {hit.citation}\n{hit.snippet.strip()}")
    return "\n\n".join(lines)
