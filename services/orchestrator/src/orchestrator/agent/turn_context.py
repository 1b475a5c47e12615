"""The volatile part of a turn (time, recalled memory), appended to its user message and stored
with it: the system prompt stays byte-stable, and later turns re-send exactly what was sent, so a
provider's prompt cache covers the whole history."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

TURN_CONTEXT_MARK = "[Crayfish turn context]"


def turn_context(timezone: str, recall: str = "", now: datetime | None = None) -> str:
    """The volatile part of a turn, appended to its user message and stored with it, so the
    next turn re-sends the same bytes: the time to the minute and the memory recall."""
    zone = ZoneInfo(timezone) if timezone else None
    now = now or datetime.now(zone).astimezone(zone)
    zone_name = timezone or now.tzname() or "local"
    text = f"{TURN_CONTEXT_MARK} now={now:%Y-%m-%d %H:%M} ({now:%A}) tz={zone_name}"
    return f"{text}\n\n{recall}" if recall else text


def chat_note(channel: str) -> str:
    """The line a turn from a chat channel gets: where its answer goes, and how it shows an
    image it made (the channel sends a workspace image the answer shows as a picture)."""
    return (
        f"[You are answering in a {channel} chat: write as suits a chat. To show an image "
        "file from the workspace, write ![description](path/in/workspace.png).]"
    )


def with_turn_context(message: str, context: str) -> str:
    return f"{message}\n\n{context}"


def without_turn_context(content: str) -> str:
    """A stored user message as its user wrote it (for display)."""
    head, mark, _ = content.rpartition(f"\n\n{TURN_CONTEXT_MARK}")
    return head if mark else content


def content_without_turn_context(content: Any) -> Any:
    """A stored user message's content (text, or text and image parts) as its user wrote it."""
    if isinstance(content, str):
        return without_turn_context(content)
    if isinstance(content, list):
        return [
            {**part, "text": without_turn_context(part["text"])}
            if isinstance(part, dict) and isinstance(part.get("text"), str)
            else part
            for part in content
        ]
    return content
