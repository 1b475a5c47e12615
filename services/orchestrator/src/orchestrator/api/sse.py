"""Server-sent events through sse-starlette: JSON payloads, ids for Last-Event-ID, keep-alives."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent

KEEPALIVE_SECONDS = 15.0
LINE_END = "\n"


def sse_event(data: Any, event: str | None = None, event_id: int | None = None) -> ServerSentEvent:
    """An event whose data is `data` as JSON (a string is sent as it is)."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    ident = None if event_id is None else str(event_id)
    return ServerSentEvent(payload, event=event, id=ident, sep=LINE_END)


def sse_comment(text: str) -> ServerSentEvent:
    """A comment line: clients skip it; it shows progress to whoever reads the raw stream."""
    return ServerSentEvent(comment=text, sep=LINE_END)


def resume_after(value: str | None) -> int:
    """The id a reconnecting client saw last (its Last-Event-ID header); 0 for none."""
    return int(value) if value and value.strip().isdigit() else 0


def sse_response(
    source: AsyncIterator[ServerSentEvent], headers: Mapping[str, str] | None = None
) -> EventSourceResponse:
    """Streams the events, with a `: keepalive` comment every KEEPALIVE_SECONDS."""
    return EventSourceResponse(
        source,
        headers=headers,
        ping=KEEPALIVE_SECONDS,
        sep=LINE_END,
        ping_message_factory=lambda: sse_comment("keepalive"),
    )
