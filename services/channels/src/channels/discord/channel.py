"""Discord: the REST API through discord.py's `HTTPClient` (its rate-limit buckets and 429
handling), messages from the gateway (gateway.py). Discord renders Markdown itself, so the
model's text is sent as it is."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable
from typing import Any, TypeVar

import aiohttp
from discord.errors import (
    DiscordServerError,
    Forbidden,
    HTTPException,
    LoginFailure,
    NotFound,
    RateLimited,
)
from discord.http import HTTPClient, Route, handle_message_parameters

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
from channels.discord.files import fetch_attachment, message_attachments, picture_message
from channels.discord.gateway import Gateway, ResumeFile

log = logging.getLogger(__name__)
TEXT_LIMIT = 2000
NETWORK_RETRY = 2.0  # seconds before retrying after a timeout or a dropped connection
T = TypeVar("T")


class DiscordChannel(Channel):
    name = "discord"
    text_limit = TEXT_LIMIT

    def __init__(self, settings: ChannelsSettings):
        self.access = Access.parse(
            settings.discord_dm_policy, settings.discord_allow_from, settings.discord_open_groups
        )
        self.token = settings.discord_token
        self.timeout = settings.call_timeout
        # discord.py builds every URL from this class attribute; one API per process.
        Route.BASE = settings.discord_api_url.rstrip("/")
        self.gateway = Gateway(self.token, ResumeFile(settings.discord_state_file), self.timeout)
        self.http: HTTPClient | None = None
        self.bot_id = ""

    async def start(self) -> None:
        await self.close()
        # A 429 longer than 30 s (the least discord.py allows) comes back as RateLimited, so
        # the reply waits it out between attempts instead of inside one call.
        self.http = HTTPClient(asyncio.get_running_loop(), max_ratelimit_timeout=30.0)
        try:
            me = await self._timed(self.http.static_login(self.token))
        except LoginFailure as exc:
            raise PlatformRefused(f"Discord refused the token: {exc}") from exc
        self.bot_id = str(me["id"])
        log.info("discord: connected as %s", me.get("username"))

    async def receive(self, inbox: Inbox) -> None:
        assert self.http is not None
        _, url, _ = await self._timed(self.http.get_bot_gateway())

        async def dispatch(event: str, data: dict[str, Any]) -> None:
            inbound = self.inbound(data) if event == "MESSAGE_CREATE" else None
            if inbound is not None:
                await inbox(inbound)

        async with aiohttp.ClientSession() as session:
            await self.gateway.run(session, url, dispatch)

    def inbound(self, message: dict[str, Any]) -> Inbound | None:
        """The message as an Inbound; None for what is not a person's (bots) or is empty."""
        author = message.get("author") or {}
        text = self._without_mention(message.get("content") or "")
        attachments = message_attachments(message)
        if author.get("bot") or not author.get("id") or not (text or attachments):
            return None
        group = bool(message.get("guild_id"))
        return Inbound(
            chat_id=str(message["channel_id"]),
            message_id=str(message["id"]),
            sender_id=str(author["id"]),
            sender_name=author.get("global_name") or author.get("username") or "",
            sender_handle=author.get("username") or "",
            text=text,
            group=group,
            addressed=not group or self._addressed(message),
            attachments=attachments,
        )

    def _addressed(self, message: dict[str, Any]) -> bool:
        replied = (message.get("referenced_message") or {}).get("author") or {}
        mentioned = {str(user.get("id")) for user in message.get("mentions") or []}
        return str(replied.get("id")) == self.bot_id or self.bot_id in mentioned

    def _without_mention(self, text: str) -> str:
        """A leading `<@bot>` (or `<@!bot>`) dropped."""
        return re.sub(rf"^\s*<@!?{re.escape(self.bot_id)}>", "", text).strip()

    async def send(self, chat_id: str, markdown: str) -> str:
        http = self._client()
        with handle_message_parameters(content=markdown) as params:
            sent = await self._call(http.send_message(chat_id, params=params))
        return str(sent["id"])

    async def edit(self, chat_id: str, message_id: str, markdown: str) -> None:
        http = self._client()
        with handle_message_parameters(content=markdown) as params:
            await self._call(http.edit_message(chat_id, message_id, params=params))

    async def send_image(self, chat_id: str, picture: Picture) -> str:
        """A message with the picture uploaded (multipart: `payload_json` and `files[0]`), or
        with an embed showing its URL."""
        http = self._client()
        with handle_message_parameters(**picture_message(picture)) as params:
            sent = await self._call(http.send_message(chat_id, params=params))
        return str(sent["id"])

    async def fetch(self, attachment: Attachment, max_bytes: int) -> bytes:
        return await self._timed(fetch_attachment(attachment, max_bytes))

    async def typing(self, chat_id: str) -> None:
        await self._call(self._client().send_typing(chat_id))

    def _client(self) -> HTTPClient:
        if self.http is None:
            raise RetryLater("Discord is not connected yet", NETWORK_RETRY)
        return self.http

    async def _timed(self, call: Awaitable[T]) -> T:
        try:
            return await asyncio.wait_for(call, self.timeout)
        except TimeoutError as exc:
            raise RetryLater("Discord did not answer in time", NETWORK_RETRY) from exc

    async def _call(self, call: Awaitable[T]) -> T:
        """One REST call within the timeout, its errors as the contract's. discord.py waits
        out a 429 itself (cut short by the timeout: RetryLater); over 30 s: RateLimited."""
        try:
            return await self._timed(call)
        except RateLimited as exc:
            raise RetryLater(str(exc), exc.retry_after) from exc
        except DiscordServerError as exc:
            raise RetryLater(f"Discord failed: {exc}", NETWORK_RETRY) from exc
        except (Forbidden, NotFound, HTTPException) as exc:
            if exc.status == 429:
                raise RetryLater(str(exc), NETWORK_RETRY) from exc
            raise PlatformRefused(str(exc)) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise RetryLater(f"Discord did not answer: {exc}", NETWORK_RETRY) from exc

    async def close(self) -> None:
        if self.http is not None:
            await self.http.close()
            self.http = None
