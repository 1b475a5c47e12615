"""Webhooks of notifications: the body each preset expects, the signature, and one delivery
attempt (the job queue retries it on 5xx and timeouts).

Signed as Standard Webhooks are (standardwebhooks.com): `webhook-id` (one per delivery, the same
on its retries), `webhook-timestamp` (Unix seconds of this attempt) and `webhook-signature`
(`v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`). A receiver that refuses timestamps
older than a few minutes and ids it has seen cannot be fed a captured delivery again; the old
`X-Crayfish-Signature` (the body alone) verified forever, so it is gone. A secret `whsec_<base64>`
is used as its decoded bytes (so Standard Webhooks' own libraries verify it), any other as UTF-8.

A webhook's URL (Slack and Discord put their token in it) and its secret come from settings
only; logs name a webhook by its number and host, never by URL or secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import httpx

from orchestrator.config import WebhookTarget

log = logging.getLogger(__name__)

Priority = Literal["low", "normal", "high", "urgent"]
PRIORITIES: tuple[Priority, ...] = ("low", "normal", "high", "urgent")
NTFY_PRIORITY = {"low": 2, "normal": 3, "high": 4, "urgent": 5}
DISCORD_MAX_CHARS = 2000
COMBINED_MAX_CHARS = 4000  # the text of several notifications sent as one


@dataclass(frozen=True)
class Notification:
    text: str
    title: str = ""
    priority: Priority = "normal"
    session_id: str = ""
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    ts: float = field(default_factory=time.time)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class DeliveryRetryable(Exception):
    """The webhook failed in a way worth trying again (5xx, 429, timeout, no connection)."""


class DeliveryRefused(Exception):
    """The webhook refused the notification (4xx): trying again would not help."""


def fingerprint(target: WebhookTarget) -> str:
    """Names a webhook in queued jobs without its URL: a changed setting is noticed."""
    return hashlib.sha256(f"{target.preset} {target.url}".encode()).hexdigest()[:16]


def describe(index: int, target: WebhookTarget) -> str:
    """How logs and errors name a webhook: number, preset and host only."""
    return f"webhook #{index + 1} ({target.preset}, {urlsplit(target.url).hostname})"


def combined(notes: list[Notification]) -> Notification:
    """Several notifications as one delivery: the highest priority, each one a line."""
    if len(notes) == 1:
        return notes[0]
    lines = [f"- {n.title}: {n.text}" if n.title else f"- {n.text}" for n in notes]
    text = "\n".join(lines)
    if len(text) > COMBINED_MAX_CHARS:
        text = text[: COMBINED_MAX_CHARS - 40] + "\n… (the rest is in the notification feed)"
    sessions = {n.session_id for n in notes}
    return Notification(
        text,
        f"{len(notes)} notifications",
        max((n.priority for n in notes), key=PRIORITIES.index),
        sessions.pop() if len(sessions) == 1 else "",
    )


def webhook_request(
    target: WebhookTarget, note: Notification, delivery_id: str, timestamp: int
) -> tuple[str, bytes, dict[str, str]]:
    """(url, body, headers) of the POST that delivers `note` to `target`."""
    url, payload = _shaped(target, note)
    body = json.dumps(payload, ensure_ascii=False).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "crayfish-notify/1",
        "webhook-id": delivery_id,
        "webhook-timestamp": str(timestamp),
    }
    if target.secret:
        headers["webhook-signature"] = sign(target.secret, delivery_id, timestamp, body)
    return url, body, headers


def sign(secret: str, delivery_id: str, timestamp: int, body: bytes) -> str:
    """`v1,<base64 HMAC-SHA256>` of `<id>.<timestamp>.<body>` (Standard Webhooks)."""
    signed = f"{delivery_id}.{timestamp}.".encode() + body
    digest = hmac.new(signing_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signing_key(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        try:
            return base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except binascii.Error:
            pass  # not base64 after all: used as written
    return secret.encode()


def _shaped(target: WebhookTarget, note: Notification) -> tuple[str, dict[str, Any]]:
    if target.preset == "slack":
        return target.url, {"text": f"*{note.title}*\n{note.text}" if note.title else note.text}
    if target.preset == "discord":
        text = f"**{note.title}**\n{note.text}" if note.title else note.text
        return target.url, {"content": text[:DISCORD_MAX_CHARS]}
    if target.preset == "ntfy":
        # ntfy's JSON publishing: POST to the server's root with the topic in the body.
        parts = urlsplit(target.url)
        prefix, _, topic = parts.path.rstrip("/").rpartition("/")
        root = urlunsplit((parts.scheme, parts.netloc, prefix or "/", "", ""))
        payload: dict[str, Any] = {
            "topic": topic,
            "message": note.text,
            "priority": NTFY_PRIORITY[note.priority],
        }
        if note.title:
            payload["title"] = note.title
        return root, payload
    return target.url, {
        "text": note.text,
        "title": note.title,
        "priority": note.priority,
        "session_id": note.session_id,
    }


async def deliver(
    client: httpx.AsyncClient,
    index: int,
    target: WebhookTarget,
    note: Notification,
    delivery_id: str,
) -> None:
    """One attempt; raises DeliveryRetryable or DeliveryRefused when it did not land."""
    url, body, headers = webhook_request(target, note, delivery_id, int(time.time()))
    name = describe(index, target)
    try:
        response = await client.post(url, content=body, headers=headers)
    except httpx.TransportError as exc:  # timeouts, refused connections, resets
        raise DeliveryRetryable(f"{name}: {type(exc).__name__}") from None
    if response.status_code >= 500 or response.status_code == 429:
        raise DeliveryRetryable(f"{name}: HTTP {response.status_code}")
    if response.status_code >= 400:
        raise DeliveryRefused(f"{name}: HTTP {response.status_code}")
    log.info("delivery %s delivered to %s", delivery_id, name)
