"""What a channel owes its chats, for its long poll (GET /api/channels/{channel}/owed): the
pending replies and messages, and a cursor, the newest of them (0020_channel_owed.sql numbers
both from one counter). A wait ends as soon as the channel owes anything newer than the cursor
it was given, woken by the OWED notification an insert on any replica sends (store/channels.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.store.channels import ChannelMessage, ChannelReply, ChannelStore
from orchestrator.store.events import EventStore, sleep_until


@dataclass(frozen=True)
class Owed:
    """What a channel owes now; `cursor`: the newest of them (0: nothing)."""

    replies: list[ChannelReply]
    messages: list[ChannelMessage]
    cursor: int


class OwedToChannels:
    def __init__(self, channels: ChannelStore, events: EventStore):
        self.channels = channels
        self.events = events
        self.db = channels.db

    async def owed(self, channel: str) -> Owed:
        """The replies and messages the channel owes now (each list its oldest 200)."""
        async with self.db.connection() as conn:
            # The cursor first: a row added after it is newer than it, so the next long poll
            # answers at once even if the lists below missed that row.
            cursor = await conn.execute(
                "SELECT greatest((SELECT max(seq) FROM channel_replies WHERE channel = %s"
                " AND status = 'pending'), (SELECT max(id) FROM channel_messages"
                " WHERE channel = %s AND status = 'pending')) AS newest",
                (channel, channel),
            )
            row = await cursor.fetchone()
        newest = int(row["newest"] or 0) if row else 0
        replies = await self.channels.replies(channel, "pending")
        return Owed(replies, await self.channels.messages(channel, "pending"), newest)

    async def wait(
        self, channel: str, after: int, wait: float, closing: Callable[[], bool] = lambda: False
    ) -> Owed:
        """What the channel owes, once it owes anything newer than the cursor `after`, after
        `wait` seconds, or once `closing()` (the server stops: it need not wait for us): woken
        by the OWED notification of any replica (and a look every POLL_SECONDS in case the
        listener missed one)."""
        deadline = time.monotonic() + wait
        async with self.events.woken_when_owed(channel) as woken:
            while True:
                woken.clear()  # before the look: a notification during it is not lost
                left = deadline - time.monotonic()
                if left <= 0 or closing() or await self.owes_after(channel, after):
                    return await self.owed(channel)
                await sleep_until(woken, left)

    async def owes_after(self, channel: str, after: int) -> bool:
        """Whether the channel owes a reply or message newer than the cursor `after`."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT EXISTS (SELECT 1 FROM channel_replies WHERE channel = %s"
                " AND status = 'pending' AND seq > %s) OR EXISTS (SELECT 1 FROM channel_messages"
                " WHERE channel = %s AND status = 'pending' AND id > %s) AS owes",
                (channel, after, channel, after),
            )
            row = await cursor.fetchone()
        return bool(row and row["owes"])
