"""The /mcp endpoint's backend: the orchestrator's own core, no HTTP hop."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from crayfish_cli.mcp_tools import BackendError, ChatAnswer, MemoryHits

from orchestrator.clients import ServiceError
from orchestrator.core import OrchestratorCore
from orchestrator.store import InvalidSessionId

CHAT_WAIT = 900.0  # seconds a chat call waits for its turn (the LLM deadline is 600 by default)


class CoreBackend:
    """Runs turns and searches through the core, found when called (it starts with the app)."""

    def __init__(self, core: Callable[[], OrchestratorCore], chat_wait: float = CHAT_WAIT):
        self.core = core
        self.chat_wait = chat_wait

    async def chat(self, message: str, session_id: str | None) -> ChatAnswer:
        core = self.core()
        try:
            task = await core.submit(session_id or uuid.uuid4().hex, message)
        except InvalidSessionId as exc:
            raise BackendError(str(exc)) from exc
        done = await core.wait_for_task(task.id, within=self.chat_wait)
        if done.status != "completed":
            reason = done.error or f"it is still {done.status} after {self.chat_wait:g} s"
            raise BackendError(f"the turn ended {done.status}: {reason} (task {done.id})")
        return ChatAnswer(answer=done.result or "", session_id=done.session_id, task_id=done.id)

    async def memory_search(self, query: str, k: int) -> MemoryHits:
        core = self.core()
        try:
            found = await core.search_memory(query, top_k=k, deadline=core.settings.rpc_timeout * 6)
        except ServiceError as exc:
            raise BackendError(f"memory search failed: {exc}") from exc
        return MemoryHits.model_validate(found, from_attributes=True)
