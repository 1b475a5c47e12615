"""Webhooks of notifications: the body each preset expects, the HMAC signature, and one
delivery attempt (the job queue retries it on 5xx and timeouts).

A webhook's URL (Slack and Discord put their token in it) and its secret come from settings
only; logs name a webhook by its number and host, never by URL or secret.
"""

from __future__ import annotations

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
SIGNATURE_HEADER = "X-Crayfish-Signature"
DISCORD_MAX_CHARS = 2000


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


def webhook_request(target: WebhookTarget, note: Notification) -> tuple[str, bytes, dict[str, str]]:
    """(url, body, headers) of the POST that delivers `note` to `target`."""
    url, payload = _shaped(target, note)
    body = json.dumps(payload, ensure_ascii=False).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "crayfish-notify/1"}
    if target.secret:
        headers[SIGNATURE_HEADER] = "sha256=" + sign(target.secret, body)
    return url, body, headers


def sign(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


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
    client: httpx.AsyncClient, index: int, target: WebhookTarget, note: Notification
) -> None:
    """One attempt; raises DeliveryRetryable or DeliveryRefused when it did not land."""
    url, body, headers = webhook_request(target, note)
    name = describe(index, target)
    try:
        response = await client.post(url, content=body, headers=headers)
    except httpx.TransportError as exc:  # timeouts, refused connections, resets
        raise DeliveryRetryable(f"{name}: {type(exc).__name__}") from None
    if response.status_code >= 500 or response.status_code == 429:
        raise DeliveryRetryable(f"{name}: HTTP {response.status_code}")
    if response.status_code >= 400:
        raise DeliveryRefused(f"{name}: HTTP {response.status_code}")
    log.info("notification %s delivered to %s", note.id, name)
