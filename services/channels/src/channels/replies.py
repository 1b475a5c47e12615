"""The answers a channel owes its chats. Each channel turn's reply is a row in the orchestrator
(channel_replies) until this service says it was delivered or failed for good, so a restart
delivers what was owed (`drain`). A reply is sent in pieces within the platform's limit, each
retried after the platform's 429 retry_after (or a timeout) up to `attempts` times, then the
images it shows (pictures.py)."""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

from channels.api_client import (
    OrchestratorClient,
    OrchestratorError,
    OrchestratorUnreachable,
)
from channels.attempts import GaveUp, attempt
from channels.contract import Channel, PlatformRefused
from channels.pictures import Pictures, chat_text
from channels.progress import TurnProgress
from channels.text import split_text

log = logging.getLogger(__name__)
DONE = frozenset({"completed", "failed", "cancelled", "interrupted"})
ORCHESTRATOR_RETRY = 2.0  # seconds between attempts while the orchestrator is away


class Replies:
    def __init__(
        self, channel: Channel, api: OrchestratorClient, attempts: int, stream_every: float
    ):
        self.channel = channel
        self.api = api
        self.attempts = attempts
        self.stream_every = stream_every
        self.pictures = Pictures(channel, api, self._attempt, attempts)
        self.running: dict[str, str] = {}  # chat → its running task (for /stop, /status)
        self._tasks: dict[str, asyncio.Task[None]] = {}  # task id → its follower here
        self._said: set[asyncio.Task[None]] = set()
        self._messages: dict[int, asyncio.Task[None]] = {}  # owed messages being sent

    def follow(self, chat_id: str, task_id: str) -> None:
        """Shows the turn's progress in the chat, then delivers its answer (in the background;
        a second call for the same turn does nothing)."""
        if task_id in self._tasks:
            return
        self.running[chat_id] = task_id
        job = asyncio.create_task(self._follow(chat_id, task_id), name=f"reply-{task_id}")
        self._tasks[task_id] = job
        job.add_done_callback(lambda _: self._forget(chat_id, task_id))

    def _forget(self, chat_id: str, task_id: str) -> None:
        self._tasks.pop(task_id, None)
        if self.running.get(chat_id) == task_id:
            del self.running[chat_id]

    async def drain(self) -> None:
        """Follows every reply still owed (after a restart, or one whose follower failed) and
        sends the messages owed (notifications to a chat)."""
        for owed in await self.api.owed_replies(self.channel.name):
            self.follow(owed["chat_id"], owed["task_id"])
        for message in await self.api.owed_messages(self.channel.name):
            number = int(message["id"])
            if number not in self._messages:
                job = asyncio.create_task(self._message(message), name=f"message-{number}")
                self._messages[number] = job
                job.add_done_callback(functools.partial(self._sent, number))

    def _sent(self, number: int, _: asyncio.Task[None]) -> None:
        self._messages.pop(number, None)

    async def _message(self, message: dict[str, Any]) -> None:
        status, error = "delivered", ""
        text, chat_id = str(message["text"]), message["chat_id"]
        try:
            for piece in split_text(chat_text(text), self.channel.text_limit):
                await self._attempt(lambda p=piece: self.channel.send(chat_id, p))
        except (GaveUp, PlatformRefused) as exc:
            status, error = "failed", str(exc) or type(exc).__name__
            log.warning("%s: message %s failed: %s", self.channel.name, message["id"], error)
        if status == "delivered":
            await self.pictures.send(chat_id, text, message_id=int(message["id"]))
        while True:
            try:
                await self.api.settle_message(self.channel.name, message["id"], status, error)
                return
            except (OrchestratorUnreachable, OrchestratorError) as exc:
                log.info("%s: settling message %s: %s", self.channel.name, message["id"], exc)
                if isinstance(exc, OrchestratorError) and exc.status < 500:
                    return  # refused for good: nothing to retry
                await asyncio.sleep(ORCHESTRATOR_RETRY)

    async def close(self) -> None:
        jobs = [*self._tasks.values(), *self._said, *self._messages.values()]
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)

    async def _follow(self, chat_id: str, task_id: str) -> None:
        try:
            progress = TurnProgress(self.channel, chat_id, self.stream_every)
            await progress.typing_once()
            task = await self._until_done(task_id, progress)
            # A message the platform sent again after its answer went out: nothing to send.
            if await self.api.still_owed(self.channel.name, task_id):
                await self._deliver(chat_id, task, progress.message_id)
        except asyncio.CancelledError:
            raise
        except Exception:  # the row stays pending: the next drain tries again
            log.exception("%s: reply of task %s not delivered now", self.channel.name, task_id)

    async def _until_done(self, task_id: str, progress: TurnProgress) -> dict[str, Any]:
        """The finished task, its progress shown meanwhile (resuming a dropped stream)."""
        after = 0
        while True:
            try:
                task = await self.api.task(task_id)
                if task["status"] in DONE:
                    return task
                after = await progress.follow(self.api.events(task_id, after))
            except OrchestratorUnreachable as exc:
                log.info("%s: following %s: %s", self.channel.name, task_id, exc)
                await asyncio.sleep(ORCHESTRATOR_RETRY)

    async def _deliver(self, chat_id: str, task: dict[str, Any], streamed: str | None) -> None:
        text = answer_text(task)
        completed = task["status"] == "completed"
        attached = None  # a channel that attaches pictures gets them with the last piece
        if completed and self.channel.attaches_pictures:
            attached = await self.pictures.attached(text, task["task_id"])
        status, error = "delivered", ""
        try:
            pieces = split_text(chat_text(text), self.channel.text_limit)
            if attached is not None and attached.pictures and not pieces:
                pieces = [""]  # an answer that is only pictures: a message to carry them
            for index, piece in enumerate(pieces):
                if index == 0 and streamed is not None:
                    await self._attempt(lambda p=piece: self.channel.edit(chat_id, streamed, p))
                elif attached is not None and index == len(pieces) - 1:
                    last = functools.partial(
                        self.channel.send_with_pictures, chat_id, piece, tuple(attached.pictures)
                    )
                    await self._attempt(last)
                else:
                    await self._attempt(lambda p=piece: self.channel.send(chat_id, p))
        except (GaveUp, PlatformRefused) as exc:
            status, error = "failed", str(exc) or type(exc).__name__
            log.warning("%s: reply of %s failed: %s", self.channel.name, task["task_id"], error)
        if status == "delivered" and attached is not None:
            await self.pictures.tell_missing(chat_id, attached)
        elif status == "delivered" and completed:
            await self.pictures.send(chat_id, text, task_id=task["task_id"])
        await self._settle(task["task_id"], status, error)

    async def _attempt(self, call: Any) -> None:
        """One piece, retried while the platform asks to wait; PlatformRefused at once."""
        await attempt(call, self.attempts)

    async def _settle(self, task_id: str, status: str, error: str) -> None:
        while True:
            try:
                await self.api.settle_reply(self.channel.name, task_id, status, error)
                return
            except (OrchestratorUnreachable, OrchestratorError) as exc:
                log.info("%s: settling %s: %s", self.channel.name, task_id, exc)
                if isinstance(exc, OrchestratorError) and exc.status < 500:
                    return  # refused for good: nothing to retry
                await asyncio.sleep(ORCHESTRATOR_RETRY)

    def say(self, chat_id: str, markdown: str) -> None:
        """Sends a service message (a pairing code, a command's answer) in the background,
        with the same retries: a slow platform never holds up receiving."""
        job = asyncio.create_task(self._say(chat_id, markdown), name=f"say-{chat_id}")
        self._said.add(job)
        job.add_done_callback(self._said.discard)

    async def _say(self, chat_id: str, markdown: str) -> None:
        try:
            for piece in split_text(markdown, self.channel.text_limit):
                await self._attempt(lambda p=piece: self.channel.send(chat_id, p))
        except (GaveUp, PlatformRefused) as exc:
            log.warning("%s: message to %s not sent: %s", self.channel.name, chat_id, exc)


def answer_text(task: dict[str, Any]) -> str:
    """What the chat is told of a finished turn."""
    status = task["status"]
    if status == "completed":
        return str(task.get("result") or "")
    if status == "cancelled":
        return "Stopped."
    return f"⚠️ The turn {status}: {task.get('error') or 'no reason given'}"
