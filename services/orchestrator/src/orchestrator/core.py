"""The orchestrator's domain façade: clients, LLM, the store, tasks and schedules, built once
from settings and closed at shutdown; the HTTP routes (api/) call only its methods."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

from crayfish_common.tools import Tool

from orchestrator.agent.client_request import ClientAnswer, ClientRequest
from orchestrator.agent.llm import LLMClient
from orchestrator.agent.llm_probe import LlmProbe, LlmState
from orchestrator.agent.presets import ModelPreset
from orchestrator.agent.tool_search import ToolCatalog, tool_catalog
from orchestrator.agent.tools import SEARCH_TOOLS
from orchestrator.agent.turn_models import TurnModels
from orchestrator.approvals.desk import ApprovalDesk
from orchestrator.approvals.gate import CHANNEL_KIND
from orchestrator.approvals.policy import ExecPolicy, default_policy
from orchestrator.clients import ServiceClients
from orchestrator.clients.health import DependencyState
from orchestrator.clients.memory import (
    FileLines,
    MemoryHistory,
    MemoryRestored,
    MemoryRevisionDiff,
    NoteWritten,
    SearchResult,
    SyncReport,
)
from orchestrator.clients.skills import Installation, SkillCatalog
from orchestrator.clients.tool_runner import SandboxInfo
from orchestrator.config import Settings
from orchestrator.consolidation.idle import IdleSummaries
from orchestrator.consolidation.runs import KIND as CONSOLIDATION_KIND
from orchestrator.consolidation.runs import Consolidation
from orchestrator.content.answer_images import AnswerImages
from orchestrator.content.assistant import Assistant
from orchestrator.content.chat_files import ChatFiles, told
from orchestrator.content.media import ImageRejected, vision_refusal
from orchestrator.content.media_migration import move_workspace_media
from orchestrator.content.own_tools import OwnTools
from orchestrator.metrics import Metrics
from orchestrator.notify.delivery_queue import Deliveries
from orchestrator.notify.notify import Notifier, NotifyBounds, NotifyLimit, WebhookSender
from orchestrator.notify.webhooks import DeliveryRetryable, Notification
from orchestrator.processes.turn_kills import kill_turn_processes
from orchestrator.processes.wakeups import WAKE_KIND, ProcessWakeups
from orchestrator.schedules.builtins import builtins
from orchestrator.schedules.heartbeat import Heartbeats
from orchestrator.schedules.scheduler import Scheduler
from orchestrator.store import Database, SessionStore, StoredEvent, legacy_import
from orchestrator.store.approvals import ApprovalRow, ApprovalStore
from orchestrator.store.channels import ChannelMessage, ChannelReply, ChannelStore, Pairing
from orchestrator.store.model_choices import ModelChoices
from orchestrator.store.notifications import NotificationStore
from orchestrator.store.openai_turns import OpenAITurnStore
from orchestrator.store.schedules import ScheduledTurn, ScheduleStore
from orchestrator.store.sessions import InvalidSessionId, SessionInfo, check_session_id
from orchestrator.store.subagents import KIND as CHILD_KIND
from orchestrator.store.subagents import REPORT_KIND, Child, SubagentStore
from orchestrator.store.summaries import SummaryStore
from orchestrator.store.transcripts import TranscriptMirror
from orchestrator.store.turn_requests import Earlier, TurnRequest
from orchestrator.store.usage import Budget, Grouping, UsageStore
from orchestrator.subagents.calling import calling_turn
from orchestrator.subagents.child_run import ChildRun
from orchestrator.subagents.children import Subagents
from orchestrator.subagents.reports import Reports
from orchestrator.subagents.tools import Spawn, SubagentsTool
from orchestrator.turns.client_turns import KIND as OPENAI_KIND
from orchestrator.turns.client_turns import ClientTurns
from orchestrator.turns.events import EventSink
from orchestrator.turns.manager import Turn, TurnManager
from orchestrator.turns.turn_worker import WorkerTiming
from orchestrator.usage.budgets import BudgetExceeded, BudgetGuard
from orchestrator.usage.report import budget_status, usage_report

# Pairing codes of chat channels (issue #31): an hour to approve, three waiting per channel.
PAIRING_CODE_TTL = 3600.0
MAX_PENDING_PAIRINGS = 3
log = logging.getLogger(__name__)


class SessionBusy(RuntimeError):
    """A turn of the session is queued or running."""


class OrchestratorCore:
    """Clients, LLM, sessions and turns; routes reach it through `app.state.core`."""

    def __init__(self, settings: Settings, metrics: Metrics | None = None):
        self.settings = settings
        self.clients = ServiceClients(settings)
        self.db = Database(settings.database_url, settings.database_pool_size)
        self.usage = UsageStore(self.db)
        self.budgets = BudgetGuard(self.usage, settings.timezone, self._budget_alert)
        self.llm = LLMClient(settings, self.usage.record, self.budgets.admit)
        default = settings.presets.chosen()
        self.llm_probe = LlmProbe(default.base_url, self._default_key, default.model)
        self.models = TurnModels(
            settings.presets, ModelChoices(self.db), settings.agent_name, settings.model
        )
        self.transcripts = TranscriptMirror(settings.transcripts_dir)
        self.store = SessionStore(self.db, self.transcripts)
        timing = WorkerTiming(
            concurrency=settings.worker_concurrency,
            alive_every=settings.worker_alive_every,
            stalled_after=settings.worker_stalled_after,
        )
        # Unique even for replicas that share a host name and pid (containers on one host).
        name = f"{socket.gethostname()}:{settings.http_port}:{os.getpid()}:{secrets.token_hex(3)}"
        notifications = NotificationStore(self.db)
        self.webhooks = WebhookSender(
            settings.notify_webhooks,
            settings.notify_timeout,
            notifications,
            settings.notify_coalesce,
        )
        deliveries = Deliveries(
            self.webhooks.run,
            DeliveryRetryable,
            settings.notify_attempts,
            settings.notify_backoff,
        )
        self.turns = TurnManager(
            self.db, self._run_turn, timing, name, self.transcripts, deliveries, self.store
        )
        self.webhooks.requeue = self.turns.delivery_queue.enqueue_delivery
        self.channels = ChannelStore(self.db, PAIRING_CODE_TTL, MAX_PENDING_PAIRINGS)
        self.chat_files = ChatFiles(settings.workspace)
        self.answer_images = AnswerImages(
            self.channels, settings.workspace, settings.image_max_bytes
        )
        self.notifier = Notifier(
            settings.notify_webhooks,
            notifications,
            self._publish_notification,
            self.turns.delivery_queue.enqueue_delivery,
            NotifyBounds(
                settings.notify_per_turn, settings.notify_per_hour, settings.notify_coalesce
            ),
            self._turn_here,
            self.channels,
        )
        summaries = SummaryStore(self.db)
        self.idle_summaries = IdleSummaries(
            summaries, self.llm, settings.idle_summary_minutes * 60, settings.context_tokens
        )
        own = builtins(
            settings,
            self._scheduled_heartbeat,
            self.turns.events,
            self.turns.requests,
            self.usage,
            self.models.choices,
            self.idle_summaries.summarise_idle,
            self._scheduled_consolidation,
        )
        self.scheduler = Scheduler(
            ScheduleStore(self.db), self._submit_scheduled, settings, own, self.channels
        )
        self.wakeups = ProcessWakeups(
            self.clients.tool_runner, settings.tool_runner_addr, self.turns.create
        )
        self.usage_timezone = settings.timezone or "UTC"  # the days of reports and budgets
        self.approvals = ApprovalDesk(
            ApprovalStore(self.db),
            str(settings.workspace.resolve()),
            default_policy(settings.approval_policy),
            settings.approval_timeout,
            default_policy(settings.approval_policy_outside),
        )
        children = SubagentStore(self.db)
        self.subagents = Subagents(settings, children, self.turns, self.models, self.budgets)
        self.assistant = Assistant(
            settings,
            self.clients,
            self.llm,
            self.store,
            self.turns.store,
            OwnTools(self.scheduler, self.notifier, self._subagent_tools(settings)),
            self.approvals,
        )
        self.child_run = ChildRun(
            self.assistant, children, settings.subagent_max_depth, settings.subagent_denied_tools
        )
        self.reports = Reports(children, self.notifier)
        self.turns.observers.append(self.reports.observe)
        self.assistant.session_note = self.subagents.active_note
        self.heartbeats = Heartbeats(self.assistant.workspace, self.turns)
        self.consolidation = Consolidation(
            summaries,
            self.idle_summaries,
            self.assistant.workspace,
            self.turns,
            settings.timezone,
            settings.bootstrap_max_chars,
        )
        self.openai_turns = OpenAITurnStore(self.db)
        self.client_turns = ClientTurns(self.assistant, self.openai_turns)
        self.metrics = metrics or Metrics()
        self.turns.observers.append(self.metrics.observe_event)
        self.metrics.count_active_tasks(lambda: self.turns.active_count)
        self._llm_line: asyncio.Task[None] | None = None  # logs whether the LLM answers

    async def start(self) -> None:
        """Connects, migrates, imports JSONL sessions once, then takes turns from the queue."""
        await self.db.open()
        await asyncio.to_thread(move_workspace_media, self.settings.workspace, self.assistant.media)
        await legacy_import.import_sessions(self.db, self.settings.legacy_sessions_dir)
        await self._queue_legacy_inbox()
        await self.turns.start()
        self.reports.start()
        await self.scheduler.start()
        if self.settings.process_wakeups:
            self.wakeups.start()
        self._llm_line = asyncio.create_task(self.llm_probe.log_at_start(), name="llm-line")

    async def submit(
        self,
        session_id: str,
        message: str,
        kind: str = "chat",
        images: list[dict[str, Any]] | None = None,
        model: str = "",
    ) -> Turn:
        """Acknowledges a message durably: once this returns, its turn will run (on some
        replica) after the session's earlier ones; `model`: the preset it asks (checked).
        BudgetExceeded past a daily cap."""
        check_session_id(session_id)
        await self.budgets.check(kind)
        task_id = await self.models.ask(model)
        return await self.turns.create(session_id, message, kind, task_id, images=images)

    async def submit_once(
        self,
        request: TurnRequest,
        session_id: str,
        message: str,
        images: list[dict[str, Any]] | None = None,
        kind: str = "chat",
        task_id: str | None = None,
        model: str = "",
    ) -> Turn | Earlier:
        """`submit` of a turn a client may ask for again: the new turn, or the earlier request
        this one repeats (store/turn_requests.py), whose turn is left alone."""
        check_session_id(session_id)
        await self.budgets.check(kind)
        task_id = await self.models.ask(model, task_id)
        return await self.turns.create_once(request, session_id, message, images, kind, task_id)

    async def submit_client_turn(
        self,
        request: TurnRequest,
        session_id: str,
        message: str,
        images: list[dict[str, Any]],
        asked: ClientRequest,
        model: str = "",
    ) -> Turn | Earlier:
        """`submit_once` for a /v1 request: what the client asked of the turn is stored first,
        so the replica that runs it finds it."""
        await self.budgets.check(OPENAI_KIND)
        task_id = uuid.uuid4().hex
        await self.openai_turns.put_request(task_id, asked.as_json())
        return await self.submit_once(
            request, session_id, message, images, OPENAI_KIND, task_id, model
        )

    def model_named(self, name: str) -> ModelPreset:
        """The preset of this name; UnknownModel (404 model_not_found) for none."""
        return self.models.named(name)

    def client_model(self, name: str) -> str:
        """The preset an OpenAI client's `model` asks ("": none in particular); UnknownModel
        for a name that is no preset, the agent's name or the default's own model."""
        return self.models.client_choice(name)

    async def set_session_model(self, session_id: str, model: str | None) -> bool:
        """The preset the session's turns use (None: the default); UnknownModel for a name
        that is no preset; False when there is no such session."""
        return await self.models.set_session(session_id, model)

    async def session_model(self, session_id: str) -> str | None:
        return await self.models.of_session(session_id)

    def check_request_images(self, count: int) -> None:
        """ImageRejected (400) when one request carries more images than it may, all its
        messages together; checked before any is fetched or stored."""
        self.assistant.media.check_request(count)

    async def take_images(self, urls: list[str]) -> list[dict[str, Any]]:
        """Checks and stores a message's images before its turn is queued; ImageRejected
        (with the HTTP status) when they are refused or the model cannot see them."""
        if not urls:
            return []
        if not self.assistant.vision:
            raise ImageRejected(400, vision_refusal(self.settings))
        return await self.assistant.media.take_in(urls)

    async def _submit_scheduled(
        self, session_id: str, message: str, kind: str, task_id: str, model: str | None
    ) -> Turn:
        await self.models.ask_kept(model, task_id)  # before it is queued, as `submit`'s
        return await self.turns.create(session_id, message, kind, task_id)

    def _turn_here(self, session_id: str) -> str | None:
        running = self.turns.running_here(session_id)
        return running.id if running is not None else None

    async def _publish_notification(self, session_id: str, data: dict[str, Any]) -> None:
        """A `notification` event in the stream of the session's turn running here (the turn
        that called notify), else on its own; either way on the global stream."""
        running = self.turns.running_here(session_id)
        if running is not None:
            await self.turns.publish(running, "notification", data)
        else:
            data = {"session_id": session_id, **data}
            await self.turns.events.add(f"notify-{uuid.uuid4().hex}", "notification", data)

    async def dependency_states(self) -> list[DependencyState]:
        """The services and the database, as /readyz reports them."""
        states = await self.clients.dependency_states()
        ok, detail = await self.db.check()
        return [*states, DependencyState("database", self.db.address, ok, detail)]

    async def own_tool_names(self) -> set[str]:
        """The names of every tool Crayfish itself may offer the model now."""
        return set(await self.assistant.registry.refresh()) | set(SEARCH_TOOLS)

    async def tool_catalog(self) -> ToolCatalog:
        """Every tool the model can use now, asking the services whose list is stale."""
        await self.assistant.registry.refresh()
        return tool_catalog(self.assistant.registry)

    async def render_metrics(self) -> bytes:
        """The metrics, with the count of queued and running tasks (all replicas) read now."""
        self.turns.active_count = await self.turns.store.count_active()
        return self.metrics.render()

    async def usage_report(
        self, by: Grouping, since: str | None, until: str | None
    ) -> dict[str, Any]:
        """LLM requests summed per group; UsageQueryInvalid for a time it cannot read."""
        report = await usage_report(self.usage, by, since, until, self.usage_timezone)
        return report.as_dict()

    async def usage_budget(self) -> dict[str, Any]:
        """The daily caps, and today's spend against them."""
        return await budget_status(self.usage, *self.budgets.day_start())

    async def replace_usage_budget(self, budget: Budget) -> dict[str, Any]:
        """Stores new caps: every replica applies them from its next turn on."""
        await self.budgets.replace(budget)
        return await self.usage_budget()

    async def exec_policy(self) -> ExecPolicy:
        """The workspace's exec policy (the configured default until one is stored)."""
        return await self.approvals.policy()

    async def replace_exec_policy(self, body: Any) -> ExecPolicy:
        """Replaces the exec policy; PolicyInvalid names the field at fault."""
        return await self.approvals.replace_policy(body)

    async def pending_approvals(self) -> list[ApprovalRow]:
        """Commands of running turns waiting for a person, oldest first."""
        return await self.approvals.pending()

    async def answer_approval(self, approval_id: str, decision: str) -> ApprovalRow:
        """Answers a waiting command from any replica (approvals/desk.py for the errors)."""
        return await self.approvals.answer(approval_id, decision)

    async def awaiting_approval(self, turn_ids: list[str]) -> set[str]:
        """Which of these turns wait for a person's answer now."""
        return await self.approvals.waiting(turn_ids)

    async def pair_sender(
        self, channel: str, sender_id: str, sender_name: str, new_code: bool = True
    ) -> Pairing | None:
        """A channel's sender: approved, or its code to approve (PairingsFull past the cap;
        None for a sender without one when no `new_code` may be made)."""
        return await self.channels.pair(channel, sender_id, sender_name, new_code)

    async def pending_pairings(self) -> list[Pairing]:
        return await self.channels.pending()

    async def approve_pairing(self, code: str, channel: str | None) -> Pairing | None:
        return await self.channels.approve(code, channel)

    async def submit_channel_turn(
        self,
        request: TurnRequest,
        channel: str,
        chat_id: str,
        session_id: str,
        message: str,
        image_urls: list[str] | None = None,
        files: list[tuple[str, bytes]] | None = None,
    ) -> Turn | Earlier:
        """A chat message (and its images, as data: URLs) as an outside turn, once per
        platform message (`request.key`), with the reply it owes the chat recorded (again on a
        repeat: a crash may have come between). Other files go to the workspace's inbox/ and
        the message names them. ImageRejected, ChatFileRefused."""
        check_session_id(session_id)
        if not session_id.startswith(f"{channel}."):  # approvals/gate.py: a chat's session
            raise InvalidSessionId(f"a {channel} chat's session id starts with `{channel}.`")
        await self.budgets.check(CHANNEL_KIND)
        self.check_request_images(len(image_urls or []))
        images = await self.take_images(image_urls or [])
        if files:
            paths = await self.chat_files.put(request.key or "", files)
            message = told(message, paths, [len(data) for _, data in files])
        task_id = await self.models.ask("")
        submitted = await self.turns.create_once(
            request, session_id, message, images, CHANNEL_KIND, task_id
        )
        if isinstance(submitted, Turn):
            await self.channels.owe_reply(submitted.id, channel, chat_id)
        else:
            await self.channels.owe_reply(submitted.task_id, channel, chat_id)
        return submitted

    async def channel_replies(
        self, channel: str, status: str | None, task_id: str | None = None
    ) -> list[ChannelReply]:
        return await self.channels.replies(channel, status, task_id)

    async def settle_channel_reply(
        self, channel: str, task_id: str, status: str, error: str
    ) -> bool:
        return await self.channels.settle_reply(channel, task_id, status, error)

    async def channel_messages(self, channel: str, status: str | None) -> list[ChannelMessage]:
        return await self.channels.messages(channel, status)

    async def settle_channel_message(
        self, channel: str, message_id: int, status: str, error: str
    ) -> bool:
        return await self.channels.settle_message(channel, message_id, status, error)

    async def channel_image(
        self, channel: str, path: str, task_id: str | None, message_id: int | None
    ) -> tuple[bytes, str]:
        """The bytes and type of a workspace image that the answer of `task_id` (or the message
        `message_id`), which `channel` owes or delivered, shows; AnswerImageRefused."""
        if task_id is not None:
            return await self.answer_images.of_reply(channel, task_id, path)
        return await self.answer_images.of_message(channel, message_id or 0, path)

    async def delete_session(self, session_id: str) -> None:
        """Cancels the subagents its turns spawned still at work (they use its sandbox), closes
        the session's sandbox, then deletes its history, holding the session: a turn sent
        meanwhile waits and starts afresh. Raises SessionBusy while a turn is queued or
        running, and the client's ServiceError (nothing deleted) if the sandbox stays open."""

        async def close_sandbox() -> None:
            if await self.turns.active(session_id):
                raise SessionBusy("the session has a queued or running task")
            await self.subagents.cancel_in_session(session_id)
            await self.clients.tool_runner.close_session(session_id)

        await self.store.delete_locked(session_id, close_sandbox)

    # What the routes (api/) and the MCP tools ask, each delegated to the part that knows it;
    # no route reaches into those parts itself (tests/test_layering.py).

    def llm_state(self) -> LlmState:
        """What is known of the LLM provider, without waiting (agent/llm_probe.py)."""
        return self.llm_probe.known()

    async def describe_sandbox(self) -> SandboxInfo:
        """The tool-runner's sandbox: its backend and what it warns about."""
        return await self.clients.tool_runner.describe_sandbox()

    async def session_exists(self, session_id: str) -> bool:
        """Whether the session has a history; InvalidSessionId for a malformed id."""
        return await self.store.exists(session_id)

    async def list_sessions(self) -> list[SessionInfo]:
        """Sessions, most recently updated first."""
        return await self.store.list()

    async def session_parents(self, session_ids: list[str]) -> dict[str, Child]:
        """Of these sessions, the subagents' own: their subagent (parent, label, turn)."""
        return await self.subagents.store.of_child_sessions(session_ids)

    async def session_history(self, session_id: str) -> list[dict[str, Any]]:
        """The session's history, as its turns are given it (OpenAI-format messages)."""
        return await self.store.load(session_id)

    async def seed_session(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Begins a new session's history with a client's earlier messages (a /v1 request
        that brings its conversation), as one group, before its first turn is queued."""
        await self.store.append(session_id, messages)

    async def delete_unused_session(self, session_id: str) -> None:
        """Deletes a session no turn ran in (so no sandbox to close): one seeded for a request
        whose identical twin got its turn first."""
        await self.store.delete(session_id)

    async def get_task(self, task_id: str) -> Turn | None:
        """The turn as it is now, or None when there is none with that id."""
        return await self.turns.get(task_id)

    async def wait_for_task(self, task_id: str, within: float | None = None) -> Turn:
        """The turn once it has ended, or as it is after `within` seconds."""
        return await self.turns.wait(task_id, within)

    async def cancel_task(self, turn: Turn) -> Turn:
        """Stops a queued or running turn, wherever it runs, the background processes it
        started, and its subagents; returns it as it then is."""
        ended = await self.turns.cancel(turn)
        await kill_turn_processes(self.clients.tool_runner, ended)
        for child, child_turn in await self.subagents.cancel_children(turn.id):
            await kill_turn_processes(self.clients.tool_runner, child_turn, child.sandbox_session)
        return ended

    async def subagents_of(self, parent_id: str) -> list[Child]:
        """The subagents a turn spawned, oldest first, each with its turn."""
        return await self.subagents.children_of(parent_id)

    def follow_task(self, task_id: str, after_seq: int) -> AsyncIterator[StoredEvent]:
        """The turn's events after `after_seq`, live, up to its terminal event."""
        return self.turns.follow(task_id, after_seq)

    def follow_all_tasks(self, after_id: int | None) -> AsyncIterator[StoredEvent]:
        """Every turn's events after the global id `after_id` (None: the latest ones), live."""
        return self.turns.follow_all(after_id)

    async def earlier_request(self, request: TurnRequest) -> Earlier | None:
        """The earlier request that started a turn and that this one repeats, if any."""
        return await self.turns.requests.earlier(request)

    async def client_answer(self, task_id: str) -> ClientAnswer:
        """What a /v1 turn answered beyond its text (calls of the client's tools, a refusal)."""
        return ClientAnswer.from_json(await self.openai_turns.answer(task_id))

    async def conversation_sessions(self, digests: list[str]) -> dict[str, str]:
        """The sessions whose /v1 conversation is one of these digests: {digest: session id}."""
        return await self.openai_turns.sessions_of(digests)

    async def remember_conversation(self, session_id: str, digest: str) -> None:
        """The session's /v1 conversation as its client now holds it (api/conversation.py)."""
        await self.openai_turns.remember(session_id, digest)

    async def add_schedule(
        self,
        message: str,
        *,
        session_id: str | None = None,
        at: str | None = None,
        every: float | None = None,
        cron: str | None = None,
        timezone: str | None = None,
        model: str | None = None,
        deliver_to: str | None = None,
    ) -> ScheduledTurn:
        """A new schedule (exactly one of `at`, `every`, `cron`); ScheduleInvalid when not,
        UnknownModel (404 model_not_found) when `model` is no preset."""
        return await self.scheduler.add(
            message,
            session_id=session_id,
            at=at,
            every=every,
            cron=cron,
            timezone=timezone,
            model=model,
            deliver_to=deliver_to,
        )

    async def list_schedules(self) -> list[ScheduledTurn]:
        """Every schedule, the soonest first."""
        return await self.scheduler.entries()

    async def remove_schedule(self, schedule_id: str) -> bool:
        """Deletes the schedule; False when there was none with that id."""
        return await self.scheduler.remove(schedule_id)

    async def search_memory(
        self,
        query: str,
        *,
        top_k: int = 0,
        min_score: float | None = None,
        path_prefix: str = "",
        strategy: str = "",
        deadline: float | None = None,
    ) -> SearchResult:
        """The memory service's hits for the query; 0, None and "" leave its defaults."""
        return await self.clients.memory.search(
            query,
            top_k=top_k,
            min_score=min_score,
            path_prefix=path_prefix,
            strategy=strategy,
            deadline=deadline,
        )

    async def read_memory_lines(
        self, path: str, start_line: int, line_count: int, deadline: float | None = None
    ) -> FileLines:
        """Lines of a memory file (0 from the start, a count of 0 to the end)."""
        return await self.clients.memory.read_lines(path, start_line, line_count, deadline)

    async def write_memory_note(
        self, text: str, path: str = "", deadline: float | None = None, reason: str = ""
    ) -> NoteWritten:
        """Appends a note to memory (today's file without a path) and indexes it."""
        return await self.clients.memory.write_note(text, path, deadline, reason)

    async def sync_memory(self, force: bool, deadline: float | None = None) -> SyncReport:
        """Brings the memory index up to date with the files now."""
        return await self.clients.memory.sync(force, deadline)

    async def memory_history(self, limit: int = 50, path: str = "") -> MemoryHistory:
        """Revisions of MEMORY.md, USER.md, SOUL.md and memory/, newest first."""
        return await self.clients.memory.history(limit, path)

    async def memory_revision(self, rev: str) -> MemoryRevisionDiff:
        """One revision of the memory files and its diff."""
        return await self.clients.memory.revision(rev)

    async def restore_memory(self, rev: str, reason: str = "", path: str = "") -> MemoryRestored:
        """The memory files (or one) as they were at `rev`, as a new revision (author `api`)."""
        return await self.clients.memory.restore(rev, reason, path)

    async def list_skills(self) -> SkillCatalog:
        """Every skill with its availability, and each broken SKILL.md's diagnostic."""
        return await self.clients.skills.list_skills()

    async def install_skill_archive(self, archive: bytes, name: str, replace: bool) -> Installation:
        """Installs a skill from a .zip or .tar.gz archive (`name` tells which)."""
        return await self.clients.skills.install_archive(archive, name, replace)

    async def install_skill_folder(self, folder: str, replace: bool) -> Installation:
        """Installs a skill from a folder on the skills service's host."""
        return await self.clients.skills.install_folder(folder, replace)

    async def uninstall_skill(self, name: str) -> None:
        """Removes an installed (managed) skill."""
        await self.clients.skills.uninstall(name)

    async def _queue_legacy_inbox(self) -> None:
        for entry in await legacy_import.pending_inbox(self.db, self.settings.data_dir):
            # Under its old id: queued once even if another replica imports it too.
            kind = entry.get("kind", "chat")
            await self.turns.create(entry["session_id"], entry["message"], kind, entry["task_id"])
        await legacy_import.inbox_imported(self.db)

    async def _budget_alert(self, title: str, text: str) -> None:
        try:
            await self.notifier.notify(Notification(text, title, priority="high"))
        except NotifyLimit as exc:
            log.warning("budget notification not sent: %s", exc)

    def _subagent_tools(self, settings: Settings) -> list[Tool]:
        """`spawn` and `subagents` (none when CRAYFISH_SUBAGENT_MAX_DEPTH is 0)."""
        if settings.subagent_max_depth < 1:
            return []
        return [Spawn(self.subagents), SubagentsTool(self.subagents)]

    async def _run_turn(self, turn: Turn, emit: EventSink) -> str:
        # Checked again here: a turn queued before a cap was passed, and background turns.
        await self.budgets.check(turn.kind)
        turn.model = await self.models.of_turn(turn)
        calling_turn.set(turn)  # for spawn and subagents (this run's context only)
        if turn.kind == CHILD_KIND:
            return await self.child_run.run(turn, emit)
        if turn.kind == REPORT_KIND:
            text = await self.assistant.run_chat(turn, emit)
            await self.reports.tell_unwatched(turn, text, self.turns.watches.watched(turn.id))
            return text
        if turn.kind == "heartbeat":
            return await self.assistant.run_heartbeat(turn, emit)
        if turn.kind in ("schedule", WAKE_KIND):
            return await self.assistant.run_scheduled(turn, emit)
        if turn.kind == CONSOLIDATION_KIND:
            return await self.consolidation.run(turn, emit, self.assistant.run_upkeep)
        if turn.kind == OPENAI_KIND:
            return await self.client_turns.run(turn, emit)
        return await self.assistant.run_chat(turn, emit)

    async def trigger_heartbeat(self) -> Turn | None:
        """Queues a heartbeat turn, or None when HEARTBEAT.md lists nothing (no LLM call) or a
        heartbeat is queued or running; BudgetExceeded past a daily cap of background turns."""
        await self.budgets.check("heartbeat")
        return await self.heartbeats.trigger()

    async def _scheduled_heartbeat(self) -> None:
        try:
            await self.trigger_heartbeat()
        except BudgetExceeded as exc:  # the user was notified when the cap was passed
            log.warning("heartbeat skipped: %s", exc)

    async def consolidate_memory(self) -> Turn | None:
        """Starts memory consolidation now: its turn (one already queued or running, else a
        new one), or None when nothing happened since the last run (no LLM call);
        BudgetExceeded past a daily cap of background turns."""
        await self.budgets.check(CONSOLIDATION_KIND)
        return await self.consolidation.trigger()

    async def _scheduled_consolidation(self) -> None:
        try:
            await self.consolidate_memory()
        except BudgetExceeded as exc:  # the user was notified when the cap was passed
            log.warning("memory consolidation skipped: %s", exc)

    def _default_key(self) -> str:
        """The default preset's first key now (CRAYFISH_MODEL_KEYS_FILE may have changed it)."""
        return next(iter(self.settings.model_keys.current().chosen().keys), "")

    async def close(self) -> None:
        if self._llm_line is not None:
            self._llm_line.cancel()
        self.llm_probe.close()
        await self.scheduler.close()
        await self.reports.close()
        await self.wakeups.close()
        await self.turns.shutdown()
        await self.webhooks.close()
        await self.db.close()
        await asyncio.to_thread(self.transcripts.close)
        await self.llm.close()
        await self.clients.close()
