"""Matrix room ids as chat ids a session id can hold, and whether a message speaks to the bot.

A session id is `[A-Za-z0-9][A-Za-z0-9_.-]*`, while a room id is `!opaque:server[:port]`: the
chat id keeps letters, digits, `.` and `-` and writes every other byte as `_xx` (hex), so it
reads back exactly (`!abc:example.org` → `abc_3aexample.org`)."""

from __future__ import annotations

import re
from typing import Any

_KEPT = re.compile(rb"[A-Za-z0-9.-]")


def chat_id_of(room_id: str) -> str:
    """The room's chat id (its leading `!` dropped: every room id has one)."""
    raw = room_id.removeprefix("!").encode()
    return "".join(chr(b) if _KEPT.fullmatch(bytes([b])) else f"_{b:02x}" for b in raw)


def room_id_of(chat_id: str) -> str:
    """The room id a chat id stands for; ValueError when it is not one of ours."""
    raw = bytearray()
    at = 0
    while at < len(chat_id):
        if chat_id[at] == "_":
            raw += bytes.fromhex(chat_id[at + 1 : at + 3])
            at += 3
        else:
            raw += chat_id[at].encode()
            at += 1
    return "!" + raw.decode()


def mentions(content: dict[str, Any], user_id: str, names: tuple[str, ...]) -> bool:
    """Whether the message names the bot: in `m.mentions` (the spec's intentional mentions), or
    its user id or a name of it in the body (clients without m.mentions write the pill's
    text there)."""
    listed = content.get("m.mentions")
    if isinstance(listed, dict) and user_id in (listed.get("user_ids") or []):
        return True
    body = str(content.get("body") or "").lower()
    return user_id.lower() in body or any(_names(body, name) for name in names if name)


def _names(body: str, name: str) -> bool:
    return re.search(rf"(?<![\w@]){re.escape(name.lower())}\b", body) is not None


def replied_to(content: dict[str, Any]) -> str:
    """The event id this message answers (`m.in_reply_to`), or ''."""
    relates = content.get("m.relates_to")
    if not isinstance(relates, dict):
        return ""
    reply = relates.get("m.in_reply_to")
    return str(reply.get("event_id") or "") if isinstance(reply, dict) else ""


def without_mention(text: str, user_id: str, names: tuple[str, ...]) -> str:
    """`crayfish: /help` or `@crayfish:server hi` → the text after the bot's name."""
    for name in (user_id, *names):
        if name and text.lower().startswith(name.lower()):
            rest = text[len(name) :].lstrip(":, ").strip()
            return rest or text
    return text


def without_reply_fallback(body: str) -> str:
    """The body without the quoted lines older clients put before a reply (`> <@a:b> …`)."""
    lines = body.split("\n")
    if not lines or not lines[0].startswith("> <"):
        return body
    while lines and lines[0].startswith(">"):
        lines.pop(0)
    return "\n".join(lines).strip() or body
