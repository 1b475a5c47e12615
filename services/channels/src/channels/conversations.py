"""One channel's chats: who may talk (pairing, allowlist, open, disabled; groups only when
addressed), chat commands, and a message as a turn of the chat's session, queued before the
platform is told the message was received."""

from __future__ import annotations

import hashlib
import logging
import re

from channels.api_client import OrchestratorClient, OrchestratorError
from channels.attachments import attachments_of
from channels.commands import Commands
from channels.contract import Channel, Inbound
from channels.replies import Replies

log = logging.getLogger(__name__)
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # what the orchestrator takes


def session_of(channel: str, message: Inbound) -> str:
    """The chat's session: `<channel>.<chat>`, per thread where the platform has threads."""
    thread = f".{message.thread_id}" if message.thread_id else ""
    session = f"{channel}.{message.chat_id}{thread}"
    if SESSION_ID.match(session):
        return session
    # Chat ids like email addresses hold characters a session id cannot: their digest
    # (distinct chats never share one, unlike replacing the characters would).
    digest = hashlib.sha256(f"{message.chat_id}\0{message.thread_id}".encode()).hexdigest()
    return f"{channel}.{digest[:32]}"


class Conversations:
    def __init__(self, channel: Channel, api: OrchestratorClient, replies: Replies):
        self.channel = channel
        self.api = api
        self.replies = replies
        self.commands = Commands(channel.name, api, replies)
        self.paired: set[str] = set()  # senders the orchestrator said are approved

    async def receive(self, message: Inbound) -> None:
        """The channel's inbox: returns once the message is queued as a turn, answered, or
        ignored on purpose; raises (the platform keeps the message) when the orchestrator
        cannot take it now."""
        access = self.channel.access
        if message.group and not message.addressed and message.chat_id not in access.open_groups:
            return
        if not await self._admitted(message):
            return
        session_id = session_of(self.channel.name, message)
        if message.text.startswith("/") and await self.commands.run(message, session_id):
            return
        taken = await attachments_of(self.channel, message)
        if taken.refused:
            self.replies.say(message.chat_id, "⚠️ Not taken: " + "; ".join(taken.refused))
        text = message.text or ("(an image)" if taken.images else "(a file)")
        try:
            task_id = await self.api.submit(
                self.channel.name,
                message.chat_id,
                message.message_id,
                session_id,
                text,
                taken.images,
                taken.files,
            )
        except OrchestratorError as exc:
            if exc.status >= 500:
                raise
            self.replies.say(message.chat_id, f"⚠️ Not started: {exc.message}")
            return
        self.replies.follow(message.chat_id, task_id)

    async def _admitted(self, message: Inbound) -> bool:
        access = self.channel.access
        if message.group and message.chat_id in access.open_groups:
            return True
        allowed = access.allow_from
        if "*" in allowed or message.sender_id in allowed or message.sender_handle in allowed:
            return access.dm_policy != "disabled" or message.group
        if access.dm_policy != "pairing":
            return False  # allowlist/open without the sender, or disabled: ignored
        return await self._paired(message)

    async def _paired(self, message: Inbound) -> bool:
        if message.sender_id in self.paired:
            return True
        try:
            pairing = await self.api.pair(
                self.channel.name, message.sender_id, message.sender_name, not message.group
            )
        except OrchestratorError as exc:
            if exc.status >= 500:
                raise
            if exc.status == 429:
                self.replies.say(message.chat_id, PAIRINGS_FULL)
            return False  # 404: a stranger in a group, who gets no code
        if pairing["status"] == "approved":
            self.paired.add(message.sender_id)
            return True
        if not message.group:  # a code is given in private only
            self.replies.say(message.chat_id, pairing_text(self.channel.name, pairing))
        return False


PAIRINGS_FULL = "I can't take more pairing requests right now. Please try again in an hour."


def pairing_text(channel: str, pairing: dict[str, object]) -> str:
    code = pairing["code"]
    return (
        "Hi! I don't know you yet. Ask my owner to approve this code (valid for an hour):\n\n"
        f"`{code}`\n\nThey run: `crayfish pairing approve {channel} {code}`"
    )
