"""Telegram through python-telegram-bot's `Bot` (the Bot API client), driving getUpdates itself:
an update's offset is acknowledged (the next getUpdates' `offset`) only after the inbox took it.

Not PTB's `Application`/`Updater`: its polling loop acknowledges every fetched update with the
next poll, before handlers have queued anything, so a crash would lose those messages."""

from __future__ import annotations

import asyncio
import datetime
import logging

from telegram import Bot, InputFile, Message, Update
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.request import HTTPXRequest

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
from channels.telegram.markdown import to_html

log = logging.getLogger(__name__)
TEXT_LIMIT = 4096
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})  # the model's
PHOTO_MAX_BYTES = 700_000  # channels/attachments.py's FILE_MAX_BYTES
NETWORK_RETRY = 2.0  # seconds before retrying after a timeout or a dropped connection


class TelegramChannel(Channel):
    name = "telegram"
    text_limit = TEXT_LIMIT

    def __init__(self, settings: ChannelsSettings):
        self.access = Access.parse(
            settings.telegram_dm_policy,
            settings.telegram_allow_from,
            settings.telegram_open_groups,
        )
        timeout = settings.call_timeout
        self.poll_timeout = settings.telegram_poll_timeout
        # A pool per kind of call: a hung send never holds up the poll, nor other chats' sends.
        calls = HTTPXRequest(32, timeout, timeout, timeout, timeout)
        polls = HTTPXRequest(1, timeout + self.poll_timeout, timeout, timeout, timeout)
        base = settings.telegram_api_url.rstrip("/")
        self.bot = Bot(
            settings.telegram_token,
            base_url=f"{base}/bot",
            base_file_url=f"{base}/file/bot",
            request=calls,
            get_updates_request=polls,
        )
        self.offset: int | None = None

    async def start(self) -> None:
        try:
            await self.bot.initialize()  # getMe: the token works, and the bot's own name
            await self.bot.delete_webhook()  # getUpdates answers only without a webhook
        except InvalidToken as exc:
            raise PlatformRefused(f"Telegram refused the token: {exc}") from exc
        log.info("telegram: connected as @%s", self.bot.username)

    async def receive(self, inbox: Inbox) -> None:
        while True:
            updates = await self._poll()
            for update in updates:
                inbound = self.inbound(update)
                if inbound is not None:
                    await inbox(inbound)  # raises: unacknowledged, Telegram sends it again
                self.offset = update.update_id + 1

    async def _poll(self) -> tuple[Update, ...]:
        try:
            return await self.bot.get_updates(
                offset=self.offset, timeout=self.poll_timeout, allowed_updates=["message"]
            )
        except RetryAfter as exc:
            await asyncio.sleep(_seconds(exc.retry_after))
            return ()

    def inbound(self, update: Update) -> Inbound | None:
        """The update as an Inbound; None for what is not a text message from a person."""
        message = update.message
        if message is None or message.from_user is None or message.from_user.is_bot:
            return None
        text = message.text or message.caption or ""
        attachments = _attachments(message)
        if not text.strip() and not attachments:
            return None
        user = message.from_user
        group = message.chat.type in ("group", "supergroup")
        return Inbound(
            chat_id=str(message.chat.id),
            message_id=str(message.message_id),
            sender_id=str(user.id),
            sender_name=user.full_name,
            sender_handle=f"@{user.username}" if user.username else "",
            text=self._without_mention(text),
            group=group,
            addressed=not group or self._addressed(message),
            thread_id=str(message.message_thread_id or "") if message.is_topic_message else "",
            attachments=attachments,
        )

    def _addressed(self, message: Message) -> bool:
        replied = message.reply_to_message
        if replied is not None and replied.from_user is not None:
            if replied.from_user.id == self.bot.id:
                return True
        mention = f"@{self.bot.username}".lower()
        named = message.parse_entities(["mention", "bot_command"]).values()
        if any(text.lower() == mention or text.lower().endswith(mention) for text in named):
            return True
        for entity in message.entities:
            if entity.type == "text_mention" and entity.user and entity.user.id == self.bot.id:
                return True
        return False

    def _without_mention(self, text: str) -> str:
        """`/help@bot` → `/help`; a leading `@bot` dropped."""
        mention = f"@{self.bot.username}"
        if text.startswith("/"):
            command, _, rest = text.partition(" ")
            text = f"{command.removesuffix(mention)} {rest}".strip()
        return text.removeprefix(mention).strip() or text

    async def send(self, chat_id: str, markdown: str) -> str:
        sent = await self._call(
            lambda mode, text: self.bot.send_message(chat_id, text, parse_mode=mode), markdown
        )
        return str(sent.message_id)

    async def edit(self, chat_id: str, message_id: str, markdown: str) -> None:
        try:
            await self._call(
                lambda mode, text: self.bot.edit_message_text(
                    text, chat_id, int(message_id), parse_mode=mode
                ),
                markdown,
            )
        except PlatformRefused as exc:
            if "not modified" not in str(exc):  # the same text again is no failure
                raise

    async def send_image(self, chat_id: str, picture: Picture) -> str:
        """sendPhoto with the URL (Telegram fetches it) or the bytes uploaded."""
        photo = InputFile(picture.data, filename=picture.name) if picture.data else picture.url
        sent = await self._call(lambda mode, text: self.bot.send_photo(chat_id, photo))
        return str(sent.message_id)

    async def typing(self, chat_id: str) -> None:
        await self._call(lambda mode, text: self.bot.send_chat_action(chat_id, ChatAction.TYPING))

    async def _call(self, send, markdown: str = ""):  # type: ignore[no-untyped-def]
        """One Bot API call with the text as HTML; as plain text when Telegram cannot parse
        the HTML (the converter's miss costs formatting, not the message). Errors mapped."""
        try:
            try:
                return await send(ParseMode.HTML, to_html(markdown))
            except BadRequest as exc:
                if "parse entities" not in str(exc).lower():
                    raise
                log.warning("telegram: HTML refused (%s); sending plain text", exc)
                return await send(None, markdown)
        except RetryAfter as exc:
            raise RetryLater(str(exc), _seconds(exc.retry_after)) from exc
        except (BadRequest, Forbidden, InvalidToken) as exc:  # BadRequest is a NetworkError
            raise PlatformRefused(str(exc)) from exc
        except (TimedOut, NetworkError) as exc:
            raise RetryLater(f"Telegram did not answer: {exc}", NETWORK_RETRY) from exc
        except TelegramError as exc:
            raise PlatformRefused(str(exc)) from exc

    async def fetch(self, attachment: Attachment, max_bytes: int) -> bytes:
        """getFile, then the file's bytes (the Bot API serves files up to 20 MB)."""
        if attachment.size > max_bytes:
            raise PlatformRefused(f"{attachment.name} is over {max_bytes} bytes")
        try:
            file = await self.bot.get_file(attachment.ref)
            if (file.file_size or 0) > max_bytes:
                raise PlatformRefused(f"{attachment.name} is over {max_bytes} bytes")
            data = bytes(await file.download_as_bytearray())
        except RetryAfter as exc:
            raise RetryLater(str(exc), _seconds(exc.retry_after)) from exc
        except (BadRequest, Forbidden, InvalidToken) as exc:
            raise PlatformRefused(str(exc)) from exc
        except (TimedOut, NetworkError) as exc:
            raise RetryLater(f"Telegram did not answer: {exc}", NETWORK_RETRY) from exc
        if len(data) > max_bytes:  # the stated size was wrong
            raise PlatformRefused(f"{attachment.name} is over {max_bytes} bytes")
        return data

    async def close(self) -> None:
        try:
            await self.bot.shutdown()
        except TelegramError as exc:
            log.warning("telegram: shutdown: %s", exc)


def _attachments(message: Message) -> tuple[Attachment, ...]:
    """A photo (its largest size) and a document, as Attachments."""
    found = []
    if message.photo:
        # The largest size that fits what the orchestrator takes, else the smallest.
        fitting = [p for p in message.photo if (p.file_size or 0) <= PHOTO_MAX_BYTES]
        photo = (fitting or list(message.photo[:1]))[-1]
        name = f"photo-{message.message_id}.jpg"
        found.append(Attachment(photo.file_id, name, "image/jpeg", photo.file_size or 0, True))
    document = message.document
    if document is not None:
        mime = document.mime_type or ""
        name = document.file_name or f"file-{message.message_id}"
        image = mime in IMAGE_TYPES
        found.append(Attachment(document.file_id, name, mime, document.file_size or 0, image))
    return tuple(found)


def _seconds(retry_after: int | datetime.timedelta) -> float:
    if isinstance(retry_after, datetime.timedelta):
        return retry_after.total_seconds()
    return float(retry_after)
