"""A small REST client of the orchestrator (httpx), following event streams (httpx-sse) and
resuming them by event id."""

from __future__ import annotations

import json
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, connect_sse

DEFAULT_URL = "http://127.0.0.1:8080"
TERMINAL = {"task.completed", "task.failed", "task.cancelled", "task.interrupted"}


class RequestFailed(Exception):
    """The orchestrator answered a request with an error (its JSON `error.message` is the text)."""

    def __init__(self, status: int, message: str, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


class Unreachable(Exception):
    """No connection to the orchestrator (refused, DNS, timeout)."""


@dataclass
class SseEvent:
    id: int
    type: str
    data: dict[str, Any] = field(default_factory=dict)


def sse_event(sse: ServerSentEvent) -> SseEvent:
    """The event with its numeric id and its JSON data (an object; anything else is dropped)."""
    payload = json.loads(sse.data)
    event_id = int(sse.id) if sse.id.isdigit() else 0
    return SseEvent(event_id, sse.event, payload if isinstance(payload, dict) else {})


def _error_of(response: httpx.Response) -> RequestFailed:
    try:
        error = response.json().get("error", {})
        return RequestFailed(response.status_code, str(error.get("message")), error.get("code"))
    except (ValueError, AttributeError):
        text = response.text.strip()[:200] or response.reason_phrase
        return RequestFailed(response.status_code, text)


class CrayfishClient:
    """The REST calls the CLI makes; raises RequestFailed or Unreachable, never httpx errors."""

    def __init__(self, base_url: str = DEFAULT_URL, token: str = "", timeout: float = 30.0):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self.http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise Unreachable(self._why(exc)) from exc
        if response.status_code >= 400:
            raise _error_of(response)
        return response.json() if response.content else {}

    def _why(self, exc: httpx.TransportError) -> str:
        reason = "connection refused" if isinstance(exc, httpx.ConnectError) else str(exc)
        return f"cannot reach the orchestrator at {self.base_url} ({reason or type(exc).__name__})"

    def chat(
        self,
        message: str,
        session_id: str | None = None,
        images: list[str] | None = None,
        model: str | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"message": message}
        if session_id:
            body["session_id"] = session_id
        if images:
            body["images"] = images
        if model:
            body["model"] = model
        result: dict[str, Any] = self.request("POST", "/api/chat", json=body)
        return result

    def task(self, task_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", f"/api/tasks/{task_id}")
        return result

    def cancel(self, task_id: str) -> None:
        try:
            self.request("POST", f"/api/tasks/{task_id}/cancel")
        except RequestFailed as exc:
            if exc.status != 409:  # 409: it finished meanwhile, which is fine
                raise

    def events(
        self, task_id: str, after: int = 0, retries: int = 5
    ) -> Generator[SseEvent, None, None]:
        """The task's events after `after`, reconnecting with Last-Event-ID if the stream drops."""
        failures = 0
        while True:
            headers = {"Last-Event-ID": str(after)} if after else {}
            try:
                with connect_sse(
                    self.http, "GET", f"/api/tasks/{task_id}/events", headers=headers, timeout=60.0
                ) as source:
                    if source.response.status_code >= 400:
                        source.response.read()
                        raise _error_of(source.response)
                    # As browsers do, an event without data is not one (a comment ended it).
                    events = (sse_event(sse) for sse in source.iter_sse() if sse.data)
                    for event in events:
                        failures = 0
                        after = max(after, event.id)
                        yield event
                        if event.type in TERMINAL:
                            return
            except httpx.TransportError as exc:
                failures += 1
                if failures > retries:
                    raise Unreachable(self._why(exc)) from exc
                time.sleep(min(0.2 * 2**failures, 3.0))
                continue
            failures += 1  # the stream ended without a terminal event: resume from `after`
            if failures > retries:
                raise Unreachable(f"the event stream of task {task_id} keeps ending early")
            time.sleep(0.2)

    def sessions(self) -> list[dict[str, Any]]:
        return list(self.request("GET", "/api/sessions").get("sessions", []))

    def session(self, session_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", f"/api/sessions/{session_id}")
        return result

    def models(self) -> list[dict[str, Any]]:
        """The model presets (GET /v1/models without the agent's own entry)."""
        listed = self.request("GET", "/v1/models")["data"]
        return [m for m in listed if "crayfish" in m]

    def set_session_model(self, session_id: str, model: str | None) -> dict[str, Any]:
        result: dict[str, Any] = self.request(
            "PATCH", f"/api/sessions/{session_id}", json={"model": model}
        )
        return result

    def delete_session(self, session_id: str) -> None:
        self.request("DELETE", f"/api/sessions/{session_id}")

    def schedules(self) -> list[dict[str, Any]]:
        return list(self.request("GET", "/api/schedules").get("schedules", []))

    def add_schedule(self, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.request("POST", "/api/schedules", json=body)
        return result

    def remove_schedule(self, schedule_id: str) -> None:
        self.request("DELETE", f"/api/schedules/{schedule_id}")

    def approval_policy(self) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", "/api/approvals/policy")
        return result

    def put_approval_policy(self, policy: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.request("PUT", "/api/approvals/policy", json=policy)
        return result

    def approvals(self) -> list[dict[str, Any]]:
        return list(self.request("GET", "/api/approvals").get("approvals", []))

    def answer_approval(self, approval_id: str, decision: str) -> dict[str, Any]:
        body = {"decision": decision}
        result: dict[str, Any] = self.request("POST", f"/api/approvals/{approval_id}", json=body)
        return result

    def skills(self) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", "/api/skills")
        return result

    def tools(self) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", "/api/tools")
        return result

    def memory_search(self, query: str, top_k: int | None = None) -> list[dict[str, Any]]:
        body: dict[str, Any] = {"query": query}
        if top_k:
            body["top_k"] = top_k
        return list(self.request("POST", "/api/memory/search", json=body).get("hits", []))

    def memory_file(self, path: str, start: int | None, end: int | None) -> dict[str, Any]:
        params: dict[str, Any] = {"path": path}
        if start:
            params["start_line"] = start
        if end:
            params["end_line"] = end
        result: dict[str, Any] = self.request("GET", "/api/memory/file", params=params)
        return result

    def memory_history(self, limit: int = 50, path: str = "") -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": limit}
        if path:
            params["path"] = path
        found = self.request("GET", "/api/memory/history", params=params)
        return list(found.get("revisions", []))

    def memory_revision(self, rev: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", f"/api/memory/history/{rev}")
        return result

    def memory_restore(self, rev: str, reason: str = "", path: str = "") -> dict[str, Any]:
        body = {"rev": rev, "reason": reason, "path": path}
        result: dict[str, Any] = self.request("POST", "/api/memory/restore", json=body)
        return result
