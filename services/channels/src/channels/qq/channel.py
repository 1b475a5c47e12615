"""QQ through a OneBot v11 implementation's forward WebSocket (NapCat): `message` events in
(their images and files as attachments, files.py), `send_private_msg` / `send_group_msg` out
(text, or a picture), NapCat's `set_input_status` as typing.

OneBot pushes events and has no acknowledgement: a message that arrives while this service is
down, or before its turn is queued, is not sent again. QQ messages cannot be edited, so an
answer is sent once, complete."""

from __future__ import annotations

import logging
from typing import Any

from channels.config import ChannelsSettings
from channels.contract import (
    Access,
    Attachment,
    Channel,
    Inbound,
    Inbox,
    Picture,
    PlatformRefused,
    RetryLater,
)
from channels.qq.files import QQFiles, attachments
from channels.qq.message import image_segment, parse, text_segments
from channels.qq.onebot import OneBotConnection

log = logging.getLogger(__name__)
# QQ cuts a text message somewhere past 4500 characters; NapCat does not say where, so stay
# well below it.
TEXT_LIMIT = 3000
GROUP_PREFIX = "g"  # chat ids: `<user_id>` for a private chat, `g<group_id>` for a group


class QQChannel(Channel):
    name = "qq"
    text_limit = TEXT_LIMIT
    can_edit = False

    def __init__(self, settings: ChannelsSettings):
        self.access = Access.parse(
            settings.qq_dm_policy, settings.qq_allow_from, settings.qq_open_groups
        )
        self.onebot = OneBotConnection(
            settings.qq_url, settings.qq_access_token, settings.call_timeout
        )
        self.files = QQFiles(self.onebot, settings.call_timeout)
        self.self_id = ""

    async def start(self) -> None:
        await self.onebot.open()
        try:
            me = await self.onebot.call("get_login_info")
        except RetryLater:
            if isinstance(self.onebot.lost, PlatformRefused):
                raise self.onebot.lost from None
            raise
        self.self_id = str(me["user_id"])
        log.info("qq: connected as %s (%s)", self.self_id, me.get("nickname", ""))

    async def receive(self, inbox: Inbox) -> None:
        while True:
            event = await self.onebot.events.get()
            if event is None:
                raise self.onebot.lost or RuntimeError("OneBot connection lost")
            if event.get("post_type") != "message":
                continue  # meta events (heartbeat, lifecycle), notices, requests
            inbound = await self.inbound(event)
            if inbound is not None:
                await inbox(inbound)

    async def inbound(self, event: dict[str, Any]) -> Inbound | None:
        """The event as an Inbound; None for what is not a person's text, image or file."""
        user_id = str(event.get("user_id", ""))
        if not user_id or user_id == self.self_id:
            return None
        said = parse(event.get("message", event.get("raw_message", "")), self.self_id)
        files = attachments(said.media)
        if not said.text and not files:
            return None
        sender = event.get("sender") or {}
        group = event.get("message_type") == "group"
        chat_id = f"{GROUP_PREFIX}{event.get('group_id')}" if group else user_id
        addressed = not group or self.self_id in said.mentions
        if group and not addressed and said.reply_to:
            addressed = await self._replies_to_me(said.reply_to)
        return Inbound(
            chat_id=chat_id,
            message_id=str(event.get("message_id", "")),
            sender_id=user_id,
            sender_name=str(sender.get("card") or sender.get("nickname") or ""),
            text=said.text,
            group=group,
            addressed=addressed,
            attachments=files,
        )

    async def _replies_to_me(self, message_id: str) -> bool:
        try:
            replied = await self.onebot.call("get_msg", message_id=_number(message_id))
        except (RetryLater, PlatformRefused) as exc:
            log.info("qq: the replied message %s is unknown: %s", message_id, exc)
            return False
        sender = (replied or {}).get("sender") or {}
        return str(sender.get("user_id", replied.get("user_id", ""))) == self.self_id

    async def send(self, chat_id: str, markdown: str) -> str:
        return await self._send(chat_id, text_segments(markdown))

    async def send_image(self, chat_id: str, picture: Picture) -> str:
        """An image segment: the bytes inline, or the URL for NapCat to fetch."""
        try:
            segments = image_segment(picture.data, picture.url)
        except ValueError as exc:
            raise PlatformRefused(str(exc)) from exc
        return await self._send(chat_id, segments)

    async def fetch(self, attachment: Attachment, max_bytes: int) -> bytes:
        return await self.files.fetch(attachment, max_bytes)

    async def _send(self, chat_id: str, message: list[dict[str, Any]]) -> str:
        if chat_id.startswith(GROUP_PREFIX):
            group_id = _number(chat_id.removeprefix(GROUP_PREFIX))
            sent = await self.onebot.call("send_group_msg", group_id=group_id, message=message)
        else:
            sent = await self.onebot.call(
                "send_private_msg", user_id=_number(chat_id), message=message
            )
        return str((sent or {}).get("message_id", ""))

    async def edit(self, chat_id: str, message_id: str, markdown: str) -> None:
        raise PlatformRefused("QQ messages cannot be edited")

    async def typing(self, chat_id: str) -> None:
        """NapCat's "typing…" status in a private chat; QQ groups have none."""
        if chat_id.startswith(GROUP_PREFIX):
            return
        await self.onebot.call("set_input_status", user_id=_number(chat_id), event_type=1)

    async def close(self) -> None:
        await self.onebot.close()
        await self.files.close()


def _number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise PlatformRefused(f"not a QQ id: {text!r}") from None
