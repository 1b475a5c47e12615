"""Runs every configured channel side by side, each supervised on its own: a channel whose
connection fails is reconnected with a doubling backoff while the others keep going; each
channel's state is what /readyz shows. What a channel owes comes at once through a long poll of
the orchestrator, with a drain now and then as the safety net."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from channels.api_client import OrchestratorClient, OrchestratorError, OrchestratorUnreachable
from channels.config import ChannelsSettings
from channels.contract import Channel
from channels.conversations import Conversations
from channels.replies import Replies

log = logging.getLogger(__name__)
BACKOFF_MIN = 1.0
OWED_WAIT = 25.0  # seconds the orchestrator holds a long poll of what a channel owes


@dataclass
class ChannelState:
    state: str = "starting"  # starting, running, reconnecting
    error: str = ""
    since: float = 0.0


class Hub:
    def __init__(
        self, channels: list[Channel], api: OrchestratorClient, settings: ChannelsSettings
    ):
        self.channels = channels
        self.api = api
        self.settings = settings
        self.states = {channel.name: ChannelState(since=time.time()) for channel in channels}
        self._jobs: list[asyncio.Task[None]] = []
        self._replies: list[Replies] = []

    async def start(self) -> None:
        for channel in self.channels:
            settings = self.settings
            replies = Replies(
                channel,
                self.api,
                settings.reply_attempts,
                settings.stream_every,
                settings.tool_hints,
            )
            self._replies.append(replies)
            conversations = Conversations(channel, self.api, replies)
            self._jobs.append(asyncio.create_task(self._supervise(channel, conversations)))
            self._jobs.append(asyncio.create_task(self._drain(channel.name, replies)))
            self._jobs.append(asyncio.create_task(self._wait_owed(channel.name, replies)))

    def ready(self) -> bool:
        return all(state.state == "running" for state in self.states.values())

    async def _supervise(self, channel: Channel, conversations: Conversations) -> None:
        backoff = BACKOFF_MIN
        state = self.states[channel.name]
        while True:
            try:
                await channel.start()
                self._set(state, "running", "")
                backoff = BACKOFF_MIN
                await channel.receive(conversations.receive)
                raise RuntimeError("the receive loop ended")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._set(state, "reconnecting", f"{type(exc).__name__}: {exc}")
                log.warning("%s: %s; again in %.0f s", channel.name, state.error, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.settings.backoff_max)

    async def _drain(self, name: str, replies: Replies) -> None:
        """Picks up the replies owed from before a restart, then checks now and then."""
        while True:
            try:
                await replies.drain()
            except (OrchestratorUnreachable, OrchestratorError) as exc:
                log.info("%s: owed replies not read: %s", name, exc)
            await asyncio.sleep(self.settings.drain_every)

    async def _wait_owed(self, name: str, replies: Replies) -> None:
        """Takes each reply or message the channel is owed as soon as the orchestrator has it
        (a notification, a schedule's answer); a failing poll is retried with a backoff."""
        cursor, backoff = 0, BACKOFF_MIN
        while True:
            try:
                owed = await self.api.owed(name, cursor, OWED_WAIT)
                replies.take(owed)
                cursor, backoff = owed.cursor, BACKOFF_MIN
            except (OrchestratorUnreachable, OrchestratorError) as exc:
                log.info("%s: waiting for what is owed: %s; again in %.0f s", name, exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.settings.backoff_max)

    @staticmethod
    def _set(state: ChannelState, name: str, error: str) -> None:
        if state.state != name:
            state.since = time.time()
        state.state, state.error = name, error

    async def close(self) -> None:
        for job in self._jobs:
            job.cancel()
        for job in self._jobs:
            with contextlib.suppress(asyncio.CancelledError):
                await job
        for replies in self._replies:
            await replies.close()
        for channel in self.channels:
            await channel.close()
