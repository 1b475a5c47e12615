"""The orchestrator's public REST API as this service uses it (its own token): pairing, turns,
their events, owed replies, commands. Every call has a timeout."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import aconnect_sse

TERMINAL = frozenset({"task.completed", "task.failed", "task.cancelled", "task.interrupted"})


class OrchestratorError(Exception):
    """The orchestrator answered with an error (`status`, its `code`)."""

    def __init__(self, status: int, message: str, code: str | None):
        super().__init__(f"{status} {code or ''}: {message}")
        self.status = status
        self.code = code
        self.message = message


class OrchestratorUnreachable(Exception):
    """The orchestrator did not answer (down, or slower than the call timeout)."""


@dataclass(frozen=True)
class TurnEvent:
    id: int
    type: str
    data: dict[str, Any]


class OrchestratorClient:
    def __init__(self, base_url: str, token: str, timeout: float):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout
        )

    async def close(self) -> None:
        await self.http.aclose()

    async def call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise OrchestratorUnreachable(f"{method} {path}: {exc!r}") from exc
        if response.status_code >= 400:
            raise _error_of(response)
        return response.json() if response.content else None

    async def pair(
        self, channel: str, sender_id: str, sender_name: str, new_code: bool
    ) -> dict[str, Any]:
        body = {"sender_id": sender_id, "sender_name": sender_name[:200], "new_code": new_code}
        result: dict[str, Any] = await self.call(
            "POST", f"/api/channels/{channel}/pairings", json=body
        )
        return result

    async def submit(
        self,
        channel: str,
        chat_id: str,
        message_id: str,
        session_id: str,
        text: str,
        images: list[str] | None = None,
        files: list[dict[str, str]] | None = None,
    ) -> str:
        """Queues the message as a turn (once per platform message; `images` as data: URLs,
        `files` as {name, data (base64)}); its task id."""
        body: dict[str, Any] = {"chat_id": chat_id, "message_id": message_id}
        body.update(session_id=session_id, images=images or [], files=files or [])
        accepted = await self.call(
            "POST", f"/api/channels/{channel}/turns", json={**body, "text": text}
        )
        return str(accepted["task_id"])

    async def task(self, task_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.call("GET", f"/api/tasks/{task_id}")
        return result

    async def events(self, task_id: str, after: int = 0) -> AsyncIterator[TurnEvent]:
        """The turn's events after `after` until a terminal one or the stream ends."""
        headers = {"Last-Event-ID": str(after)} if after else {}
        path = f"/api/tasks/{task_id}/events"
        # The stream has a keepalive every 15 s: one silent for longer is dead.
        timeout = httpx.Timeout(self.http.timeout.connect, read=45.0)
        try:
            async with aconnect_sse(
                self.http, "GET", path, headers=headers, timeout=timeout
            ) as source:
                if source.response.status_code >= 400:
                    await source.response.aread()
                    raise _error_of(source.response)
                async for sse in source.aiter_sse():
                    if not sse.data:
                        continue
                    # The SSE id, not the body's: an event's own data may hold an `id`.
                    number = int(sse.id) if sse.id and sse.id.isdigit() else 0
                    yield TurnEvent(number, sse.event, json.loads(sse.data))
                    if sse.event in TERMINAL:
                        return
        except httpx.TransportError as exc:
            raise OrchestratorUnreachable(f"events of {task_id}: {exc!r}") from exc

    async def owed_replies(self, channel: str) -> list[dict[str, Any]]:
        result = await self.call(
            "GET", f"/api/channels/{channel}/replies", params={"status": "pending"}
        )
        return list(result["replies"])

    async def still_owed(self, channel: str, task_id: str) -> bool:
        """Whether the turn's reply is still pending (not delivered or given up meanwhile)."""
        result = await self.call(
            "GET", f"/api/channels/{channel}/replies", params={"task_id": task_id}
        )
        return any(reply["status"] == "pending" for reply in result["replies"])

    async def owed_messages(self, channel: str) -> list[dict[str, Any]]:
        """Messages for the channel's chats that no turn asked for (notifications)."""
        result = await self.call(
            "GET", f"/api/channels/{channel}/messages", params={"status": "pending"}
        )
        return list(result["messages"])

    async def settle_message(self, channel: str, message_id: int, status: str, error: str) -> None:
        body = {"status": status, "error": error[:2000]}
        try:
            await self.call("POST", f"/api/channels/{channel}/messages/{message_id}", json=body)
        except OrchestratorError as exc:
            if exc.status != 404:  # 404: settled already
                raise

    async def answer_image(
        self, channel: str, path: str, task_id: str = "", message_id: int = 0
    ) -> tuple[bytes, str]:
        """The bytes and type of a workspace image the answer of `task_id` (or the message
        `message_id`) shows, `path` as written there. OrchestratorError: 404 not shown or
        missing, 413 too large, 415 not an image, 422 refused (a link, FIFO or device)."""
        params: dict[str, str | int] = {"path": path}
        params.update({"task_id": task_id} if task_id else {"message_id": message_id})
        try:
            response = await self.http.get(f"/api/channels/{channel}/images", params=params)
        except httpx.TransportError as exc:
            raise OrchestratorUnreachable(f"image {path[:200]}: {exc!r}") from exc
        if response.status_code >= 400:
            raise _error_of(response)
        return response.content, response.headers.get("content-type", "")

    async def settle_reply(self, channel: str, task_id: str, status: str, error: str) -> None:
        body = {"status": status, "error": error[:2000]}
        try:
            await self.call("POST", f"/api/channels/{channel}/replies/{task_id}", json=body)
        except OrchestratorError as exc:
            if exc.status != 404:  # 404: settled already (by another attempt)
                raise


def _error_of(response: httpx.Response) -> OrchestratorError:
    try:
        error = response.json().get("error", {})
        return OrchestratorError(response.status_code, str(error.get("message")), error.get("code"))
    except (ValueError, AttributeError):
        return OrchestratorError(response.status_code, response.text[:200], None)
