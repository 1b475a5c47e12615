"""Digests of an OpenAI-style conversation, so a request that extends one continues its session.

A client of /v1 resends the whole conversation with each message. Each prefix of it has a
digest (a SHA-256 chained over the messages' canonical forms): after a turn, its session
remembers the digest of the conversation as the client then holds it (the request's messages
and the answer), and a later request whose messages start with that conversation continues
the session. The canonical form keeps what a client echoes faithfully: roles, text (without
surrounding whitespace), image URLs, tool-call ids and tool results; it drops what clients
rewrite (the JSON formatting of arguments, null versus "" content, extra fields).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

START = hashlib.sha256(b"crayfish /v1 conversation").hexdigest()


def text_of(content: Any) -> str:
    """A message's text: a string, or its `text` parts joined."""
    if isinstance(content, list):
        return "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return content if isinstance(content, str) else ""


def _image_urls(content: Any) -> list[str]:
    if not isinstance(content, list):
        return []
    urls = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "image_url":
            image = part.get("image_url")
            urls.append(str(image.get("url") if isinstance(image, dict) else image))
    return urls


def canonical(message: dict[str, Any]) -> list[Any]:
    """What of a message its digest covers."""
    role = message.get("role")
    content = message.get("content")
    calls = message.get("tool_calls")
    if role == "assistant" and calls:
        return ["assistant", [str(c.get("id")) for c in calls if isinstance(c, dict)]]
    if role == "tool":
        return ["tool", str(message.get("tool_call_id")), text_of(content).strip()]
    return [role, text_of(content).strip(), _image_urls(content)]


def extend(digest: str, message: dict[str, Any]) -> str:
    """The digest of a conversation after one more message."""
    form = json.dumps(canonical(message), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(f"{digest}\n{form}".encode()).hexdigest()


def prefix_digests(messages: list[dict[str, Any]]) -> list[str]:
    """The digest of each prefix: [0] of the first message, [-1] of them all."""
    digests, digest = [], START
    for message in messages:
        digest = extend(digest, message)
        digests.append(digest)
    return digests
