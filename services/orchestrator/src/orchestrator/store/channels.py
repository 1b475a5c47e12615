"""Chat channels in PostgreSQL (0018_channels.sql): senders' pairings (a short code the owner
approves) and the replies a channel still owes its chats."""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass

from orchestrator.store.database import Database

# Codes a person reads on a phone and types: no 0/O, 1/I/L.
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
PAIRING_COLUMNS = "channel, sender_id, sender_name, code, status, created_at, expires_at"


@dataclass(frozen=True)
class Pairing:
    """A sender of a channel: approved, or waiting with a code until `expires_at`."""

    channel: str
    sender_id: str
    sender_name: str
    code: str
    status: str
    created_at: float
    expires_at: float


@dataclass(frozen=True)
class ChannelReply:
    """A channel turn's answer owed to its chat, with the turn's state."""

    task_id: str
    channel: str
    chat_id: str
    status: str
    error: str
    task_status: str
    result: str | None
    task_error: str | None


@dataclass(frozen=True)
class ChannelMessage:
    """A message a channel owes a chat that no turn of the chat asked for (a notification)."""

    id: int
    channel: str
    chat_id: str
    text: str
    status: str
    error: str


# `telegram:12345`: a channel's name (api/channels.py's CHANNEL_NAME), then the chat's id.
TARGET = re.compile(r"^([a-z][a-z0-9_-]{0,31}):([^\x00]{1,128})$")


class BadTarget(ValueError):
    """Not a `channel:chat_id` target."""


def chat_target(target: str) -> tuple[str, str]:
    """(channel, chat id) of a `channel:chat_id` target; BadTarget otherwise."""
    match = TARGET.match(target.strip())
    if match is None:
        raise BadTarget(f"{target[:140]!r} is not a `channel:chat_id` target, e.g. telegram:12345")
    return match.group(1), match.group(2)


class PairingsFull(RuntimeError):
    """The channel has as many pending codes as it may."""


class ChannelStore:
    def __init__(self, db: Database, code_ttl: float, max_pending: int):
        self.db = db
        self.code_ttl = code_ttl
        self.max_pending = max_pending

    async def pair(
        self, channel: str, sender_id: str, sender_name: str, new_code: bool = True
    ) -> Pairing | None:
        """The sender's pairing: approved, its live code, or a new code (PairingsFull when the
        channel has `max_pending` live codes; None when `new_code` is False). One channel's
        requests are serialised."""
        now = time.time()
        async with self.db.transaction() as conn:
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext('crayfish-pairing:' || %s))", (channel,)
            )
            cursor = await conn.execute(
                f"SELECT {PAIRING_COLUMNS} FROM channel_pairings"
                " WHERE channel = %s AND sender_id = %s",
                (channel, sender_id),
            )
            row = await cursor.fetchone()
            if row and (row["status"] == "approved" or row["expires_at"] > now):
                return Pairing(**row)
            if not new_code:
                return None
            cursor = await conn.execute(
                "SELECT count(*) AS n FROM channel_pairings"
                " WHERE channel = %s AND status = 'pending' AND expires_at > %s",
                (channel, now),
            )
            if (await cursor.fetchone())["n"] >= self.max_pending:  # type: ignore[index]
                raise PairingsFull(f"{channel} has {self.max_pending} pairing codes waiting")
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
            cursor = await conn.execute(
                "INSERT INTO channel_pairings AS p (channel, sender_id, sender_name, code,"
                " status, created_at, expires_at) VALUES (%s, %s, %s, %s, 'pending', %s, %s)"
                " ON CONFLICT (channel, sender_id) DO UPDATE SET code = excluded.code,"
                " sender_name = excluded.sender_name, created_at = excluded.created_at,"
                f" expires_at = excluded.expires_at RETURNING {PAIRING_COLUMNS}",
                (channel, sender_id, sender_name, code, now, now + self.code_ttl),
            )
            return Pairing(**(await cursor.fetchone()))  # type: ignore[arg-type]

    async def pending(self) -> list[Pairing]:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {PAIRING_COLUMNS} FROM channel_pairings"
                " WHERE status = 'pending' AND expires_at > %s ORDER BY created_at",
                (time.time(),),
            )
            return [Pairing(**row) for row in await cursor.fetchall()]

    async def approve(self, code: str, channel: str | None) -> Pairing | None:
        """Approves the live code (of `channel` when named); None when there is none."""
        now = time.time()
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "UPDATE channel_pairings SET status = 'approved', approved_at = %s"
                " WHERE code = %s AND status = 'pending' AND expires_at > %s"
                " AND (%s::text IS NULL OR channel = %s)"
                f" RETURNING {PAIRING_COLUMNS}",
                (now, code.strip().upper(), now, channel, channel),
            )
            row = await cursor.fetchone()
        return Pairing(**row) if row else None

    async def owe_reply(self, task_id: str, channel: str, chat_id: str) -> None:
        """Records the reply a turn owes its chat (again: nothing changes)."""
        async with self.db.connection() as conn:
            await conn.execute(
                "INSERT INTO channel_replies (task_id, channel, chat_id, created_at)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (task_id) DO NOTHING",
                (task_id, channel, chat_id, time.time()),
            )

    async def replies(
        self, channel: str, status: str | None, task_id: str | None = None
    ) -> list[ChannelReply]:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT r.task_id, r.channel, r.chat_id, r.status, r.error,"
                " t.status AS task_status, t.result, t.error AS task_error"
                " FROM channel_replies r JOIN tasks t ON t.id = r.task_id"
                " WHERE r.channel = %s AND (%s::text IS NULL OR r.status = %s)"
                " AND (%s::text IS NULL OR r.task_id = %s) ORDER BY r.created_at LIMIT 200",
                (channel, status, status, task_id, task_id),
            )
            return [ChannelReply(**row) for row in await cursor.fetchall()]

    async def settle_reply(self, channel: str, task_id: str, status: str, error: str) -> bool:
        """Marks a pending reply delivered or failed; False when there is no pending one."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "UPDATE channel_replies SET status = %s, error = %s, settled_at = %s"
                " WHERE task_id = %s AND channel = %s AND status = 'pending'",
                (status, error, time.time(), task_id, channel),
            )
            return cursor.rowcount == 1

    async def chat_of(self, session_id: str) -> str | None:
        """The `channel:chat_id` target of the chat the session talks to (its latest turn
        from a channel), if it is a chat's."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT r.channel, r.chat_id FROM channel_replies r JOIN tasks t"
                " ON t.id = r.task_id WHERE t.session_id = %s ORDER BY r.created_at DESC LIMIT 1",
                (session_id,),
            )
            row = await cursor.fetchone()
        return f"{row['channel']}:{row['chat_id']}" if row else None

    async def owe_message(self, target: str, text: str) -> None:
        """Queues a message for a `channel:chat_id` target (BadTarget) until it is settled."""
        channel, chat_id = chat_target(target)
        async with self.db.connection() as conn:
            await conn.execute(
                "INSERT INTO channel_messages (channel, chat_id, text, created_at)"
                " VALUES (%s, %s, %s, %s)",
                (channel, chat_id, text.replace("\x00", ""), time.time()),
            )

    async def messages(self, channel: str, status: str | None) -> list[ChannelMessage]:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT id, channel, chat_id, text, status, error FROM channel_messages"
                " WHERE channel = %s AND (%s::text IS NULL OR status = %s) ORDER BY id LIMIT 200",
                (channel, status, status),
            )
            return [ChannelMessage(**row) for row in await cursor.fetchall()]

    async def message(self, channel: str, message_id: int) -> ChannelMessage | None:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "SELECT id, channel, chat_id, text, status, error FROM channel_messages"
                " WHERE channel = %s AND id = %s",
                (channel, message_id),
            )
            row = await cursor.fetchone()
        return ChannelMessage(**row) if row else None

    async def settle_message(self, channel: str, message_id: int, status: str, error: str) -> bool:
        """Marks a pending message delivered or failed; False when there is no pending one."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "UPDATE channel_messages SET status = %s, error = %s, settled_at = %s"
                " WHERE id = %s AND channel = %s AND status = 'pending'",
                (status, error, time.time(), message_id, channel),
            )
            return cursor.rowcount == 1
