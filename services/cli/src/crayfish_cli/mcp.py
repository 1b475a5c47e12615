"""`crayfish mcp serve`: an MCP server on stdio that forwards to a running Crayfish over REST."""

from __future__ import annotations

import asyncio

from crayfish_cli.api import CrayfishClient, RequestFailed, Unreachable
from crayfish_cli.mcp_tools import BackendError, ChatAnswer, MemoryHits, build_mcp_server


class RestBackend:
    """The tools' backend over the REST API (the CLI's client, run in worker threads)."""

    def __init__(self, client: CrayfishClient):
        self.client = client

    async def chat(self, message: str, session_id: str | None) -> ChatAnswer:
        return await asyncio.to_thread(self._chat, message, session_id)

    async def memory_search(self, query: str, k: int) -> MemoryHits:
        hits = await asyncio.to_thread(self._call, self.client.memory_search, query, k)
        return MemoryHits.model_validate({"hits": hits})  # each hit's other fields are dropped

    def _chat(self, message: str, session_id: str | None) -> ChatAnswer:
        accepted = self._call(self.client.chat, message, session_id)
        task_id = accepted["task_id"]
        for _ in self._call(lambda: list(self.client.events(task_id))):
            pass  # followed to its terminal event
        task = self._call(self.client.task, task_id)
        if task["status"] != "completed":
            reason = task.get("error") or task["status"]
            raise BackendError(f"the turn ended {task['status']}: {reason} (task {task_id})")
        return ChatAnswer(
            answer=task.get("result") or "", session_id=task["session_id"], task_id=task_id
        )

    @staticmethod
    def _call(function, *args):  # type: ignore[no-untyped-def]
        try:
            return function(*args)
        except RequestFailed as exc:
            hint = " (set CRAYFISH_API_TOKEN)" if exc.status == 401 else ""
            raise BackendError(f"Crayfish answered {exc.status}: {exc.message}{hint}") from exc
        except Unreachable as exc:
            raise BackendError(str(exc)) from exc


def serve(client: CrayfishClient) -> int:
    """Serves MCP on stdin/stdout until the client closes them."""
    server = build_mcp_server(RestBackend(client))
    asyncio.run(server.run_stdio_async())
    return 0
