"""The orchestrator's domain façade: clients, LLM, sessions, tasks and heartbeats, built once
from settings and closed at shutdown; the HTTP routes (api/) call only this."""

from __future__ import annotations

import asyncio
import logging
import uuid

from orchestrator.agent.llm import LLMClient
from orchestrator.assistant import Assistant
from orchestrator.clients import ServiceClients
from orchestrator.config import Settings
from orchestrator.events import EventSink
from orchestrator.heartbeat import (
    HEARTBEAT_FILE,
    HEARTBEAT_SESSION,
    heartbeat_message,
    heartbeat_tasks,
)
from orchestrator.metrics import Metrics
from orchestrator.sessions.history import SessionStore
from orchestrator.sessions.inbox import Inbox
from orchestrator.tasks import Task, TaskManager

log = logging.getLogger(__name__)


class OrchestratorCore:
    """Clients, LLM, sessions and tasks; routes reach it through `app.state.core`."""

    def __init__(self, settings: Settings, metrics: Metrics | None = None):
        self.settings = settings
        self.clients = ServiceClients(settings)
        self.llm = LLMClient(settings)
        self.store = SessionStore(settings.sessions_dir)
        self.inbox = Inbox(settings.data_dir)
        self.assistant = Assistant(settings, self.clients, self.llm, self.store)
        self.tasks = TaskManager(self._run_turn)
        self.metrics = metrics or Metrics()
        self.tasks.observers.append(self.metrics.observe_event)
        self.metrics.count_active_tasks(lambda: len(self.tasks.active()))
        self._heartbeats: asyncio.Task[None] | None = None

    async def submit(self, session_id: str, message: str, kind: str = "chat") -> Task:
        """Acknowledges a message durably, then queues its turn behind the session's others."""
        self.store.path(session_id)  # validates the id before anything is written
        task_id = uuid.uuid4().hex
        # First: a message that cannot be recorded (a full disk) is refused, not run.
        await self.inbox.add(task_id, session_id, message, kind)
        return self.tasks.create(session_id, message, kind, task_id)

    async def resume_pending(self) -> int:
        """Requeues messages acknowledged before a crash or restart but never run."""
        pending = await self.inbox.pending()
        for entry in pending:
            await self.inbox.remove(entry["task_id"])
            await self.submit(entry["session_id"], entry["message"], entry.get("kind", "chat"))
        if pending:
            log.info("resumed %d pending message(s)", len(pending))
        return len(pending)

    async def _run_turn(self, task: Task, emit: EventSink) -> str:
        if task.kind == "heartbeat":
            await self.inbox.remove(task.id)
            return await self.assistant.run_heartbeat(task, emit)
        return await self.assistant.run_chat(task, emit, on_accepted=self.inbox.remove)

    async def trigger_heartbeat(self) -> Task | None:
        """Queues a heartbeat turn, or None when HEARTBEAT.md lists nothing (no LLM call)."""
        file = (await self.assistant.workspace.load([HEARTBEAT_FILE]))[0]
        tasks = heartbeat_tasks(file.text or "")
        if not tasks:
            return None
        if any(t.kind == "heartbeat" for t in self.tasks.active()):
            return None  # one at a time is plenty
        return await self.submit(HEARTBEAT_SESSION, heartbeat_message(tasks), kind="heartbeat")

    def start_heartbeats(self) -> None:
        if self.settings.heartbeat_interval > 0:
            self._heartbeats = asyncio.create_task(self._heartbeat_loop(), name="heartbeats")

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat_interval)
            try:
                await self.trigger_heartbeat()
            except Exception:  # a bad HEARTBEAT.md must not end the schedule
                log.exception("heartbeat failed")

    async def close(self) -> None:
        if self._heartbeats is not None:
            self._heartbeats.cancel()
        await self.tasks.shutdown()
        await self.store.close()
        await self.inbox.close()
        await self.llm.close()
        await self.clients.close()
