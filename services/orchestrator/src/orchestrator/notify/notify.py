"""The `notify` tool's work: bounded per turn and per hour (a refusal the model can read), a
`notification` event on the global stream at once (the web page shows it), and webhook
deliveries sent off the turn's path, several notifications in one when they come close together.

Each webhook has one delivery job queued at a time (procrastinate's queueing lock) and runs
them one at a time (its lock); a job sends everything past the webhook's cursor as one POST,
once CRAYFISH_NOTIFY_COALESCE seconds have passed since its last one (else it queues itself for
then). So a burst of notifications costs each webhook one POST now and one a little later.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from orchestrator.config import WebhookTarget
from orchestrator.notify.webhooks import (
    DeliveryRefused,
    Notification,
    combined,
    deliver,
    describe,
    fingerprint,
)
from orchestrator.store.channels import ChannelStore, chat_target
from orchestrator.store.notifications import NotificationStore

log = logging.getLogger(__name__)

BATCH_MAX = 50  # notifications in one delivery at most (the rest go in the next)

# publish(session id, event data): records a `notification` event (of the session's turn).
Publish = Callable[[str, dict[str, Any]], Awaitable[None]]
# enqueue(job arguments, lock, at): queues the webhook's delivery job unless one is queued.
Enqueue = Callable[[dict[str, Any], str, float], Awaitable[None]]
# turn_of(session id): the id of the session's turn running here, if any.
TurnOf = Callable[[str], str | None]


class NotifyLimit(Exception):
    """A notification past a bound (per turn or per hour): nothing was sent."""


@dataclass(frozen=True)
class NotifyBounds:
    per_turn: int = 5
    per_hour: int = 30
    coalesce: float = 10.0  # seconds between two deliveries to one webhook


class Notifier:
    """Checks the bounds, keeps and publishes a notification, and queues its deliveries."""

    def __init__(
        self,
        targets: list[WebhookTarget],
        store: NotificationStore,
        publish: Publish,
        enqueue: Enqueue,
        bounds: NotifyBounds,
        turn_of: TurnOf,
        chats: ChannelStore | None = None,
    ):
        self.targets = targets
        self.store = store
        self.publish = publish
        self.enqueue = enqueue
        self.bounds = bounds
        self.turn_of = turn_of
        self.chats = chats  # delivers to channel chats (the channels service sends them)

    async def notify(self, note: Notification, target: str | None = None) -> int:
        """Returns how many webhooks will get it; NotifyLimit (the reason) past a bound. A
        `channel:chat_id` target (BadTarget), else the chat the session talks to, if any, is
        owed the notification too."""
        if target:
            chat_target(target)  # a bad one is refused before it counts against the bounds
        turn = self.turn_of(note.session_id) or f"session:{note.session_id}"
        bounds = self.bounds
        marks = [fingerprint(target) for target in self.targets]
        kept = await self.store.add(
            note.as_dict(), turn, bounds.per_turn, bounds.per_hour, webhooks=marks
        )
        if kept == "turn":
            raise NotifyLimit(
                f"not sent: this turn already sent {bounds.per_turn} notifications, the most "
                "CRAYFISH_NOTIFY_PER_TURN allows. Put everything the user needs to know into "
                "your reply instead."
            )
        if kept == "hour":
            raise NotifyLimit(
                f"not sent: {bounds.per_hour} notifications were sent in the last hour, the "
                "most CRAYFISH_NOTIFY_PER_HOUR allows. Say it in your reply instead; the user "
                "will see it there."
            )
        await self.publish(note.session_id, {"notification": note.as_dict()})
        if self.chats is not None:
            target = target or await self.chats.chat_of(note.session_id)
            if target:
                await self.chats.owe_message(target, chat_text(note))
        for index, mark in enumerate(marks):
            await self.enqueue({"webhook": index, "fingerprint": mark}, mark, time.time())
        return len(self.targets)


class WebhookSender:
    """Runs delivery jobs: everything a webhook has not had, in one POST; DeliveryRetryable
    goes back to the queue to retry (the cursor stays, so the retry sends it again)."""

    def __init__(
        self,
        targets: list[WebhookTarget],
        timeout: float,
        store: NotificationStore,
        coalesce: float,
    ):
        self.targets = targets
        self.store = store
        self.coalesce = coalesce
        self.client = httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        self.requeue: Enqueue | None = None  # the job queue's, set once it exists

    async def run(self, job: dict[str, Any]) -> None:
        index = int(job.get("webhook", -1))
        if not 0 <= index < len(self.targets):
            log.warning("notification dropped: webhook #%d is no longer configured", index + 1)
            return
        target = self.targets[index]
        mark = fingerprint(target)
        if job.get("fingerprint") != mark:
            name = describe(index, target)
            log.warning("notification dropped: %s changed since it was queued", name)
            return
        if "notification" in job:  # a job queued by an older version: one notification
            note = Notification(**job["notification"])
            await self._send(index, target, note, note.id)
            return
        due = await self.store.last_sent(mark) + self.coalesce
        if due > time.time():
            await self._again(job, mark, due)  # gathers what comes meanwhile
            return
        pending = await self.store.pending(mark, BATCH_MAX)
        if not pending:
            return
        notes = [Notification(**note) for _, note in pending]
        first, last = pending[0][0], pending[-1][0]
        await self._send(index, target, combined(notes), f"msg_{mark}_{first}-{last}")
        await self.store.delivered(mark, last)
        if len(pending) == BATCH_MAX:
            await self._again(job, mark, time.time() + self.coalesce)

    async def _send(self, index: int, target: WebhookTarget, note: Notification, id_: str) -> None:
        try:
            await deliver(self.client, index, target, note, id_)
        except DeliveryRefused as exc:
            log.warning("delivery %s refused, not retried: %s", id_, exc)

    async def _again(self, job: dict[str, Any], mark: str, at: float) -> None:
        assert self.requeue is not None
        await self.requeue(job, mark, at)

    async def close(self) -> None:
        await self.client.aclose()


def chat_text(note: Notification) -> str:
    """A notification as a chat shows it (Markdown)."""
    head = f"🔔 **{note.title}**\n\n" if note.title else "🔔 "
    return head + note.text
