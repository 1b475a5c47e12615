"""The orchestrator's domain façade: clients, LLM, the store, tasks and heartbeats, built once
from settings and closed at shutdown; the HTTP routes (api/) call only this."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
import uuid
from typing import Any

from orchestrator.agent.client_request import ClientRequest
from orchestrator.agent.llm import LLMClient
from orchestrator.agent.llm_probe import LlmProbe
from orchestrator.agent.presets import ModelPreset
from orchestrator.agent.tool_search import ToolCatalog, tool_catalog
from orchestrator.agent.tools import SEARCH_TOOLS
from orchestrator.agent.turn_models import TurnModels
from orchestrator.clients import ServiceClients
from orchestrator.clients.health import DependencyState
from orchestrator.config import Settings
from orchestrator.content.assistant import Assistant
from orchestrator.content.media import ImageRejected, vision_refusal
from orchestrator.content.media_migration import move_workspace_media
from orchestrator.content.own_tools import OwnTools
from orchestrator.metrics import Metrics
from orchestrator.notify.delivery_queue import Deliveries
from orchestrator.notify.notify import Notifier, NotifyBounds, WebhookSender
from orchestrator.notify.webhooks import DeliveryRetryable
from orchestrator.schedules.heartbeat import (
    HEARTBEAT_FILE,
    HEARTBEAT_SESSION,
    heartbeat_message,
    heartbeat_tasks,
)
from orchestrator.schedules.scheduler import Scheduler
from orchestrator.store import Database, SessionStore, legacy_import, schedules
from orchestrator.store.model_choices import ModelChoices
from orchestrator.store.notifications import NotificationStore
from orchestrator.store.openai_turns import OpenAITurnStore
from orchestrator.store.schedules import ScheduleStore
from orchestrator.store.sessions import check_session_id
from orchestrator.store.transcripts import TranscriptMirror
from orchestrator.store.turn_requests import KEPT_FOR as REQUESTS_KEPT_FOR
from orchestrator.store.turn_requests import Earlier, TurnRequest
from orchestrator.turns.client_turns import KIND as OPENAI_KIND
from orchestrator.turns.client_turns import ClientTurns
from orchestrator.turns.events import EventSink
from orchestrator.turns.manager import Turn, TurnManager
from orchestrator.turns.turn_worker import WorkerTiming

log = logging.getLogger(__name__)

RETENTION_EVERY = 3600.0  # seconds between two prunings of old events (by any replica)


class SessionBusy(RuntimeError):
    """A turn of the session is queued or running."""


class OrchestratorCore:
    """Clients, LLM, sessions and tasks; routes reach it through `app.state.core`."""

    def __init__(self, settings: Settings, metrics: Metrics | None = None):
        self.settings = settings
        self.clients = ServiceClients(settings)
        self.llm = LLMClient(settings)
        default = settings.presets.chosen()
        self.llm_probe = LlmProbe(default.base_url, next(iter(default.keys), ""), default.model)
        self.db = Database(settings.database_url, settings.database_pool_size)
        self.models = TurnModels(
            settings.presets, ModelChoices(self.db), settings.agent_name, settings.model
        )
        self.transcripts = TranscriptMirror(settings.transcripts_dir)
        self.store = SessionStore(self.db, self.transcripts)
        timing = WorkerTiming(
            concurrency=settings.worker_concurrency,
            heartbeat=settings.worker_heartbeat,
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
        self.scheduler = Scheduler(ScheduleStore(self.db), self._submit_scheduled, settings)
        self.webhooks.requeue = self.turns.delivery_queue.enqueue_delivery
        self.notifier = Notifier(
            settings.notify_webhooks,
            notifications,
            self._publish_notification,
            self.turns.delivery_queue.enqueue_delivery,
            NotifyBounds(
                settings.notify_per_turn, settings.notify_per_hour, settings.notify_coalesce
            ),
            self._turn_here,
        )
        self.assistant = Assistant(
            settings,
            self.clients,
            self.llm,
            self.store,
            self.turns.store,
            OwnTools(self.scheduler, self.notifier),
        )
        self.openai_turns = OpenAITurnStore(self.db)
        self.client_turns = ClientTurns(self.assistant, self.openai_turns)
        self.metrics = metrics or Metrics()
        self.turns.observers.append(self.metrics.observe_event)
        self.metrics.count_active_tasks(lambda: self.turns.active_count)
        self._heartbeats: asyncio.Task[None] | None = None
        self._retention: asyncio.Task[None] | None = None
        self._llm_line: asyncio.Task[None] | None = None  # logs whether the LLM answers

    async def start(self) -> None:
        """Connects, migrates, imports JSONL sessions once, then takes turns from the queue."""
        await self.db.open()
        await asyncio.to_thread(move_workspace_media, self.settings.workspace, self.assistant.media)
        await legacy_import.import_sessions(self.db, self.settings.legacy_sessions_dir)
        await self._queue_legacy_inbox()
        await self.turns.start()
        self.start_heartbeats()
        if self.settings.events_retention_hours > 0:
            self._retention = asyncio.create_task(self._retention_loop(), name="retention")
        self.scheduler.start()
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
        replica) after the session's earlier ones; `model`: the preset it asks (checked)."""
        check_session_id(session_id)
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
        self, session_id: str, message: str, kind: str, task_id: str
    ) -> Turn:
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

    async def delete_session(self, session_id: str) -> None:
        """Closes the session's sandbox, then deletes its history, holding the session: a turn
        sent meanwhile waits and starts afresh. Raises SessionBusy while a turn is queued or
        running, and the client's ServiceError (nothing deleted) if the sandbox stays open."""

        async def close_sandbox() -> None:
            if await self.turns.active(session_id):
                raise SessionBusy("the session has a queued or running task")
            await self.clients.tool_runner.close_session(session_id)

        await self.store.delete_locked(session_id, close_sandbox)

    async def _queue_legacy_inbox(self) -> None:
        for entry in await legacy_import.pending_inbox(self.db, self.settings.data_dir):
            # Under its old id: queued once even if another replica imports it too.
            kind = entry.get("kind", "chat")
            await self.turns.create(entry["session_id"], entry["message"], kind, entry["task_id"])
        await legacy_import.inbox_imported(self.db)

    async def _run_turn(self, turn: Turn, emit: EventSink) -> str:
        turn.model = await self.models.of_turn(turn)
        if turn.kind == "heartbeat":
            return await self.assistant.run_heartbeat(turn, emit)
        if turn.kind == "schedule":
            return await self.assistant.run_scheduled(turn, emit)
        if turn.kind == OPENAI_KIND:
            return await self.client_turns.run(turn, emit)
        return await self.assistant.run_chat(turn, emit)

    async def trigger_heartbeat(self) -> Turn | None:
        """Queues a heartbeat turn, or None when HEARTBEAT.md lists nothing (no LLM call)."""
        file = (await self.assistant.workspace.load([HEARTBEAT_FILE]))[0]
        tasks = heartbeat_tasks(file.text or "")
        if not tasks:
            return None
        if await self.turns.active(kind="heartbeat"):
            return None  # one at a time is plenty
        return await self.submit(HEARTBEAT_SESSION, heartbeat_message(tasks), kind="heartbeat")

    def start_heartbeats(self) -> None:
        if self.settings.heartbeat_interval > 0 and self._heartbeats is None:
            self._heartbeats = asyncio.create_task(self._heartbeat_loop(), name="heartbeats")

    async def _heartbeat_loop(self) -> None:
        """Every replica ticks; the store lets one of them fire per interval."""
        every = self.settings.heartbeat_interval
        while True:
            await asyncio.sleep(every)
            try:
                if await schedules.claim(self.db, "heartbeat", every):
                    await self.trigger_heartbeat()
            except Exception:  # a bad HEARTBEAT.md must not end the schedule
                log.exception("heartbeat failed")

    async def _retention_loop(self) -> None:
        """Once an hour, one replica prunes the events of tasks past their retention."""
        while True:
            try:
                if await schedules.claim(self.db, "events-retention", RETENTION_EVERY):
                    keep = self.settings.events_retention_hours * 3600
                    removed = await self.turns.store.events.prune(time.time() - keep)
                    if removed:
                        log.info("pruned %d events of tasks older than the retention", removed)
                    await self.turns.requests.prune(time.time() - REQUESTS_KEPT_FOR)
            except Exception:  # the database may be away for a while: try again next time
                log.exception("event pruning failed")
            await asyncio.sleep(RETENTION_EVERY)

    async def close(self) -> None:
        for loop in (self._heartbeats, self._retention, self._llm_line):
            if loop is not None:
                loop.cancel()
        self.llm_probe.close()
        await self.scheduler.close()
        await self.turns.shutdown()
        await self.webhooks.close()
        await self.db.close()
        await asyncio.to_thread(self.transcripts.close)
        await self.llm.close()
        await self.clients.close()
