"""Server-sent events: formatting and a response that keeps the connection alive."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import StreamingResponse

KEEPALIVE_SECONDS = 15.0


def sse_message(data: Any, event: str | None = None, event_id: int | None = None) -> str:
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if event:
        lines.append(f"event: {event}")
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    lines += [f"data: {line}" for line in payload.split("\n")]
    return "\n".join(lines) + "\n\n"


async def with_keepalive(source: AsyncIterator[str]) -> AsyncIterator[str]:
    """Passes messages through, adding a comment line when the source is quiet."""
    iterator = source.__aiter__()
    pending: asyncio.Task[str] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(iterator.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=KEEPALIVE_SECONDS)
            if not done:
                yield ": keepalive\n\n"
                continue
            try:
                item = pending.result()
            except StopAsyncIteration:
                return
            pending = None
            yield item
    finally:
        if pending is not None:
            pending.cancel()


def sse_response(source: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(
        with_keepalive(source),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
