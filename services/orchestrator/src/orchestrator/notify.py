"""The `notify` tool's work: a `notification` event on the global stream at once (the web page
shows it), and one queued delivery job per configured webhook, sent off the turn's path."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from orchestrator.config import WebhookTarget
from orchestrator.webhooks import (
    DeliveryRefused,
    Notification,
    deliver,
    describe,
    fingerprint,
)

log = logging.getLogger(__name__)

# publish(session id, event data): records a `notification` event (of the session's turn).
Publish = Callable[[str, dict[str, Any]], Awaitable[None]]
# enqueue(job arguments): one durable delivery job (the job queue's `notify` queue).
Enqueue = Callable[[dict[str, Any]], Awaitable[None]]


class Notifier:
    """Publishes a notification and queues its webhook deliveries."""

    def __init__(self, targets: list[WebhookTarget], publish: Publish, enqueue: Enqueue):
        self.targets = targets
        self.publish = publish
        self.enqueue = enqueue

    async def notify(self, note: Notification) -> int:
        """Returns how many webhook deliveries were queued."""
        await self.publish(note.session_id, {"notification": note.as_dict()})
        for index, target in enumerate(self.targets):
            await self.enqueue(
                {
                    "webhook": index,
                    "fingerprint": fingerprint(target),
                    "notification": note.as_dict(),
                }
            )
        return len(self.targets)


class WebhookSender:
    """Runs delivery jobs: one POST each; DeliveryRetryable goes back to the queue to retry."""

    def __init__(self, targets: list[WebhookTarget], timeout: float):
        self.targets = targets
        self.client = httpx.AsyncClient(timeout=timeout, follow_redirects=False)

    async def run(self, job: dict[str, Any]) -> None:
        index = int(job.get("webhook", -1))
        if not 0 <= index < len(self.targets):
            log.warning("notification dropped: webhook #%d is no longer configured", index + 1)
            return
        target = self.targets[index]
        if job.get("fingerprint") != fingerprint(target):
            name = describe(index, target)
            log.warning("notification dropped: %s changed since it was queued", name)
            return
        note = Notification(**job["notification"])
        try:
            await deliver(self.client, index, target, note)
        except DeliveryRefused as exc:
            log.warning("notification %s refused, not retried: %s", note.id, exc)

    async def close(self) -> None:
        await self.client.aclose()
