"""Slack through slack-sdk: the Web API (`AsyncWebClient`) for sending, and Socket Mode (its
aiohttp `SocketModeClient`, whose WebSocket address comes from apps.connections.open) for
receiving, so no public URL is needed. An envelope is acknowledged only after the inbox took
its message; one left unacknowledged Slack delivers again.

A chat is a channel (`C…`, `D…`) or, for a message in a thread, `<channel>.<thread_ts>`: the
thread is its own session and its replies go into the thread."""

from __future__ import annotations

import asyncio
import dataclasses
import html
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

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
from channels.slack.files import SlackFiles, file_attachments
from channels.slack.mrkdwn import to_mrkdwn

log = logging.getLogger(__name__)
# Slack truncates a message's text past 40,000 characters and advises at most 4,000.
TEXT_LIMIT = 4000
NETWORK_RETRY = 2.0  # seconds before retrying after a timeout or a dropped connection
GROUP_TYPES = ("channel", "group", "mpim")
AUTH_ERRORS = ("invalid_auth", "not_authed", "account_inactive", "token_revoked")
TYPING_STATUS = "is typing…"
# A person's message; `file_share` is one that shares files (its text is the comment).
MESSAGE_SUBTYPES = ("", "file_share")


class SlackChannel(Channel):
    name = "slack"
    text_limit = TEXT_LIMIT

    def __init__(self, settings: ChannelsSettings):
        self.access = Access.parse(
            settings.slack_dm_policy, settings.slack_allow_from, settings.slack_open_groups
        )
        self.timeout = settings.call_timeout
        self.app_token = settings.slack_app_token
        base = settings.slack_api_url.rstrip("/") + "/"
        timeout = max(1, round(self.timeout))
        self.web = AsyncWebClient(settings.slack_bot_token, base_url=base, timeout=timeout)
        # Its own client: a hung send never holds up opening the connection.
        self.link = AsyncWebClient(base_url=base, timeout=timeout)
        self.files = SlackFiles(settings.slack_bot_token, base, self.timeout)
        self.bot_user = ""
        self.wss_url = ""
        self.last_seen: dict[str, str] = {}  # chat → ts of its latest inbound message
        self.no_status: set[str] = set()  # chats whose thread status Slack refused

    async def start(self) -> None:
        auth = await self._call(lambda: self.web.auth_test())  # the bot token, and its user id
        self.bot_user = str(auth["user_id"])
        opened = await self._call(lambda: self.link.apps_connections_open(app_token=self.app_token))
        self.wss_url = str(opened["url"])  # the app token works; the socket uses this address
        log.info("slack: connected as %s (%s)", auth.get("user"), self.bot_user)

    async def receive(self, inbox: Inbox) -> None:
        requests: asyncio.Queue[SocketModeRequest] = asyncio.Queue()

        async def enqueue(client: Any, request: SocketModeRequest) -> None:
            await requests.put(request)

        socket = SocketModeClient(self.app_token, web_client=self.link, ping_interval=5)
        socket.socket_mode_request_listeners.append(enqueue)
        socket.wss_uri = self.wss_url
        try:
            await asyncio.wait_for(socket.connect(), self.timeout)
            while True:
                request = await requests.get()
                inbound = self.inbound(request)
                if inbound is not None:
                    await inbox(inbound)  # raises: unacknowledged, Slack sends it again
                ack = SocketModeResponse(envelope_id=request.envelope_id)
                await asyncio.wait_for(socket.send_socket_mode_response(ack), self.timeout)
        finally:
            await socket.close()
            self.wss_url = ""  # a Socket Mode address is used once

    def inbound(self, request: SocketModeRequest) -> Inbound | None:
        """The envelope's message as an Inbound; None for anything but a person's new message."""
        if request.type != "events_api":
            return None
        event = request.payload.get("event") or {}
        if event.get("type") != "message" or event.get("bot_id"):
            return None  # bots' own messages; app_mention repeats a message
        if str(event.get("subtype") or "") not in MESSAGE_SUBTYPES:
            return None  # edits, deletions, joins
        user, text = str(event.get("user") or ""), str(event.get("text") or "")
        attachments = file_attachments(event)
        if not user or user == self.bot_user or not (text.strip() or attachments):
            return None
        channel, ts = str(event["channel"]), str(event["ts"])
        thread = str(event.get("thread_ts") or "")
        chat = f"{channel}.{thread}" if thread else channel
        self.last_seen[chat] = thread or ts
        group = event.get("channel_type") in GROUP_TYPES
        if thread and channel in self.access.open_groups:
            self._open_thread(chat)
        mention = f"<@{self.bot_user}>"
        addressed = mention in text or (
            thread != "" and event.get("parent_user_id") == self.bot_user
        )
        return Inbound(
            chat_id=chat,
            message_id=ts,
            sender_id=user,
            text=_plain(text.replace(mention, " ")).strip() or text,
            group=group,
            addressed=not group or addressed or channel in self.access.open_groups,
            attachments=attachments,
        )

    def _open_thread(self, chat: str) -> None:
        """A thread of an open channel is open too (the service checks the chat id)."""
        if chat not in self.access.open_groups:
            groups = self.access.open_groups | {chat}
            self.access = dataclasses.replace(self.access, open_groups=groups)

    async def send(self, chat_id: str, markdown: str) -> str:
        channel, thread = _split(chat_id)
        sent = await self._call(
            lambda: self.web.chat_postMessage(
                channel=channel, text=to_mrkdwn(markdown), thread_ts=thread, mrkdwn=True
            )
        )
        return str(sent["ts"])

    async def edit(self, chat_id: str, message_id: str, markdown: str) -> None:
        channel, _ = _split(chat_id)
        await self._call(
            lambda: self.web.chat_update(channel=channel, ts=message_id, text=to_mrkdwn(markdown))
        )

    async def send_image(self, chat_id: str, picture: Picture) -> str:
        """Bytes uploaded into the chat (files.getUploadURLExternal, the upload, then
        files.completeUploadExternal: slack-sdk's files_upload_v2; the app needs
        `files:write`); a URL as an image block, which Slack fetches itself."""
        channel, thread = _split(chat_id)
        if picture.data:
            done = await self._call(
                lambda: self.web.files_upload_v2(
                    channel=channel,
                    thread_ts=thread,
                    file=picture.data,
                    filename=picture.name,
                    title=picture.name,
                )
            )
            return str(done["files"][0]["id"])
        block = {"type": "image", "image_url": picture.url, "alt_text": picture.name}
        sent = await self._call(
            lambda: self.web.chat_postMessage(
                channel=channel, thread_ts=thread, text=picture.name, blocks=[block]
            )
        )
        return str(sent["ts"])

    async def fetch(self, attachment: Attachment, max_bytes: int) -> bytes:
        return await self.files.fetch(attachment, max_bytes)

    async def typing(self, chat_id: str) -> None:
        """Bots have no typing indicator in the Web API; an assistant thread's status is the
        nearest thing (Slack clears it with the reply). Where Slack refuses it, asked no more."""
        channel, thread = _split(chat_id)
        thread = thread or self.last_seen.get(chat_id)
        if not thread or chat_id in self.no_status:
            return
        try:
            await self._call(
                lambda: self.web.assistant_threads_setStatus(
                    channel_id=channel, thread_ts=thread, status=TYPING_STATUS
                )
            )
        except PlatformRefused:
            self.no_status.add(chat_id)
            raise

    async def _call(self, call: Callable[[], Awaitable[Any]]) -> Any:
        """One Web API call within the call timeout, its errors mapped."""
        try:
            return await asyncio.wait_for(call(), self.timeout)
        except SlackApiError as exc:
            raise _mapped(exc) from exc
        except (TimeoutError, aiohttp.ClientError, SlackClientError) as exc:
            raise RetryLater(f"Slack did not answer: {exc!r}", NETWORK_RETRY) from exc

    async def close(self) -> None:
        pass  # the Web API clients open a connection per call; the socket closes in receive


def _mapped(exc: SlackApiError) -> Exception:
    status = exc.response.status_code
    error = str(exc.response.get("error", "")) if isinstance(exc.response.data, dict) else ""
    if status == 429 or error == "ratelimited":
        retry_after = float(exc.response.headers.get("Retry-After") or NETWORK_RETRY)
        return RetryLater(f"Slack: rate limited for {retry_after:.0f} s", retry_after)
    if status >= 500:
        return RetryLater(f"Slack answered {status}", NETWORK_RETRY)
    if error in AUTH_ERRORS:
        return PlatformRefused(f"Slack refused the token: {error}")
    return PlatformRefused(f"Slack: {error or status}")


def _split(chat_id: str) -> tuple[str, str | None]:
    """`C1.1700000000.000100` → (`C1`, `1700000000.000100`); a channel alone has no thread."""
    channel, _, thread = chat_id.partition(".")
    return channel, thread or None


def _plain(text: str) -> str:
    """Slack's escaped text as typed: `<url|label>` → label, `<url>` → url, entities unescaped."""
    text = re.sub(r"<(?:[^<>|]+)\|([^<>]+)>", r"\1", text)
    text = re.sub(r"<((?:https?|mailto):[^<>]+)>", r"\1", text)
    return html.unescape(text)
