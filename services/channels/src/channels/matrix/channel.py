"""Matrix through matrix-nio's AsyncClient with an access token, driving /sync itself: the
position after a batch (its `next_batch`) is saved to the bot's account data only after every
message of the batch was handed to the inbox, so a crash before a turn was queued syncs that
message again. Invites are joined; a room of two (the bot and one person) is a direct chat,
a larger one a group, where the bot answers when mentioned or replied to. Encrypted rooms
through nio's olm machine (crypto.py): a sync's events come decrypted, and what the bot writes
in an encrypted room is encrypted.

Not nio's `sync_forever`: it moves its token on as soon as a batch arrives, before callbacks
have queued anything. One client for all calls (its olm machine and rooms are one state);
aiohttp runs its calls side by side, so a hung send does not hold up the sync."""

from __future__ import annotations

import asyncio
import html
import io
import logging
import re
import time
import uuid
from collections import deque
from typing import Any

from aiohttp import ClientError
from nio import (
    AsyncClient,
    AsyncClientConfig,
    ErrorResponse,
    LocalProtocolError,
    OlmUnverifiedDeviceError,
    SyncResponse,
)
from nio.crypto import ENCRYPTION_ENABLED

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
from channels.matrix import media, rooms, sync_token
from channels.matrix.crypto import Encryption, private_dir
from channels.telegram.markdown import to_html

log = logging.getLogger(__name__)
# Characters of Markdown per message: an edit carries the text twice (fallback and
# m.new_content) plus its HTML, JSON-escaped, and an event may be at most 65536 bytes.
TEXT_LIMIT = 2500
NETWORK_RETRY = 2.0  # seconds before retrying after a timeout or a dropped connection
LIMIT_DEFAULT = 5.0  # a 429 without retry_after_ms
OWN_EVENTS_KEPT = 500  # ids of messages the bot sent, to know a reply to it without a lookup
TAKEN = frozenset({"m.text", *media.MEDIA_MSGTYPES})  # the msgtypes answered


class MatrixChannel(Channel):
    name = "matrix"
    text_limit = TEXT_LIMIT

    def __init__(self, settings: ChannelsSettings):
        self.access = Access.parse(
            settings.matrix_dm_policy, settings.matrix_allow_from, settings.matrix_open_groups
        )
        self.timeout = settings.call_timeout
        self.poll_timeout = settings.matrix_poll_timeout
        self.started_ms = int(time.time() * 1000)
        self.client = _client(settings)
        self.crypto = Encryption(self.client, self._call)
        self.user_id = ""
        self.names: tuple[str, ...] = ()
        self.members: dict[str, int] = {}  # room → joined members, until one joins or leaves
        self.own_events: deque[str] = deque(maxlen=OWN_EVENTS_KEPT)
        self.legacy_media = False  # the server has no authenticated media (before Matrix 1.11)

    async def start(self) -> None:
        self.started_ms = int(time.time() * 1000)  # a first sync's older messages are history
        whoami = await self._call(self.client.whoami())
        self.user_id = whoami.user_id
        self.client.user_id, self.client.device_id = whoami.user_id, whoami.device_id or ""
        if not self.crypto.on:  # a reconnect keeps the loaded store
            self.crypto.open(whoami.user_id, whoami.device_id or "")
        await self.crypto.after_sync()  # a new device publishes its keys before any message
        self.names = (whoami.user_id[1:].split(":", 1)[0],)
        log.info("matrix: connected as %s", self.user_id)

    async def receive(self, inbox: Inbox) -> None:
        since = await self._guard(sync_token.load(self.client, self.timeout))
        while True:
            batch = await self._sync(since)
            await self.crypto.after_sync()
            await self._join_invited(batch)
            for room_id, info in batch.rooms.join.items():
                for event in info.timeline.events:
                    if since is None and not self._sent_since_start(event.source):
                        continue  # a new account's first sync: history, not answered
                    if self._refused(room_id, event):
                        continue
                    inbound = await self.inbound(room_id, event.source)
                    if inbound is not None:
                        await inbox(inbound)  # raises: not saved, synced again
            if since is None or batch.rooms.join or batch.rooms.invite:
                await self._guard(sync_token.save(self.client, batch.next_batch, self.timeout))
            since = batch.next_batch

    def _refused(self, room_id: str, event: Any) -> bool:
        if event.source.get("type") != "m.room.message" or event.sender == self.user_id:
            return False
        refusal = self.crypto.refusal(room_id, event)
        if refusal:
            log.warning("matrix: not taking %s in %s: %s", event.event_id, room_id, refusal)
        return bool(refusal)

    def _sent_since_start(self, event: dict[str, Any]) -> bool:
        """Whether the event was sent after this service started (the homeserver's time): a
        message sent once the channel was up is answered even when the first sync carries it."""
        sent = event.get("origin_server_ts")
        return isinstance(sent, int) and sent >= self.started_ms

    async def _sync(self, since: str | None) -> SyncResponse:
        wait = self.poll_timeout if since is not None else 0
        reply = await self._guard(self.client.sync(timeout=wait * 1000, since=since), wait)
        if isinstance(reply, ErrorResponse):
            error = _mapped(reply)
            if isinstance(error, RetryLater):
                await asyncio.sleep(error.retry_after)
            raise error
        return reply

    async def _join_invited(self, batch: SyncResponse) -> None:
        for room_id in batch.rooms.invite:
            try:
                await self._call(self.client.join(room_id))
            except PlatformRefused as exc:  # withdrawn or forbidden: nothing to join
                log.warning("matrix: could not join %s: %s", room_id, exc)

    async def inbound(self, room_id: str, event: dict[str, Any]) -> Inbound | None:
        """The event as an Inbound; None for what is not a person's new text message."""
        if event.get("type") == "m.room.member":
            self.members.pop(room_id, None)
        if event.get("type") == "m.room.encrypted":  # no key for it reached this device
            log.warning("matrix: cannot decrypt %s in %s", event.get("event_id"), room_id)
        content = event.get("content") or {}
        if event.get("type") != "m.room.message" or event.get("sender") == self.user_id:
            return None
        relation = content.get("m.relates_to") or {}
        if content.get("msgtype") not in TAKEN or relation.get("rel_type") == "m.replace":
            return None  # notices (other bots), audio, video, edits of earlier messages
        attachment = media.attachment_of(content, str(event.get("event_id")))
        text = media.caption_of(content) if attachment else str(content.get("body") or "")
        text = rooms.without_reply_fallback(text).strip()
        if not text and attachment is None:
            return None
        sender = str(event.get("sender"))
        try:
            group = await self._is_group(room_id)
        except PlatformRefused as exc:  # left or banned since: a message it cannot answer
            log.warning("matrix: skipping a message in %s: %s", room_id, exc)
            return None
        addressed = not group or rooms.mentions(content, self.user_id, self.names)
        if group and not addressed:
            addressed = await self._replies_to_bot(room_id, rooms.replied_to(content))
        return Inbound(
            chat_id=rooms.chat_id_of(room_id),
            message_id=str(event.get("event_id")),
            sender_id=sender,
            sender_name=sender[1:].split(":", 1)[0],
            text=rooms.without_mention(text, self.user_id, self.names),
            group=group,
            addressed=addressed,
            attachments=(attachment,) if attachment else (),
        )

    async def _is_group(self, room_id: str) -> bool:
        if room_id not in self.members:
            joined = await self._call(self.client.joined_members(room_id))
            self.members[room_id] = len(joined.members)
        return self.members[room_id] > 2

    async def _replies_to_bot(self, room_id: str, event_id: str) -> bool:
        if not event_id:
            return False
        if event_id in self.own_events:
            return True
        try:
            found = await self._call(self.client.room_get_event(room_id, event_id))
        except PlatformRefused:  # not visible to the bot: not an answer to it
            return False
        return bool(found.event.sender == self.user_id)

    async def send(self, chat_id: str, markdown: str) -> str:
        return await self._send(_room(chat_id), {"msgtype": "m.text", **_formatted(markdown)})

    async def edit(self, chat_id: str, message_id: str, markdown: str) -> None:
        new = {"msgtype": "m.text", **_formatted(markdown)}
        content = {
            "msgtype": "m.text",
            "body": f"* {new['body']}",  # what clients without edits show
            "m.new_content": new,
            "m.relates_to": {"rel_type": "m.replace", "event_id": message_id},
        }
        await self._send(_room(chat_id), content)

    async def send_image(self, chat_id: str, picture: Picture) -> str:
        """Uploads the picture and shows it as `m.image`; a picture that is only a URL is
        refused (Matrix shows mxc media only; the answer's text keeps the link)."""
        if not picture.data:
            raise PlatformRefused("Matrix shows only uploaded images, not a link")
        room = _room(chat_id)
        encrypted = await self.crypto.prepare(room)
        upload = self.client.upload(
            io.BytesIO(picture.data),
            content_type=picture.mime or "application/octet-stream",
            filename=picture.name,
            encrypt=encrypted,
            filesize=len(picture.data),
        )
        uploaded, keys = await self._guard(upload)
        if isinstance(uploaded, ErrorResponse):
            raise _mapped(uploaded)
        return await self._send(room, media.image_content(picture, uploaded.content_uri, keys))

    async def _send(self, room_id: str, content: dict[str, Any]) -> str:
        """An m.room.message, encrypted in an encrypted room; its event id."""
        await self.crypto.prepare(room_id)
        send = self.client.room_send(room_id, "m.room.message", content, uuid.uuid4().hex)
        sent = await self._call(send)
        self.own_events.append(sent.event_id)
        return str(sent.event_id)

    async def fetch(self, attachment: Attachment, max_bytes: int) -> bytes:
        """The media's bytes through the authenticated media API (the legacy path only when
        the server does not have it), refused past `max_bytes` before or while reading."""
        data, self.legacy_media = await self._guard(
            media.download(self.client, attachment, max_bytes, self.timeout, self.legacy_media)
        )
        return data

    async def typing(self, chat_id: str) -> None:
        await self._call(self.client.room_typing(_room(chat_id), True, timeout=5000))

    async def _call(self, call: Any, tolerated: frozenset[str] = frozenset()) -> Any:
        """One client-server API call within the call timeout; errors mapped (those with a
        `tolerated` errcode returned)."""
        reply = await self._guard(call)
        if isinstance(reply, ErrorResponse) and reply.status_code not in tolerated:
            raise _mapped(reply)
        return reply

    async def _guard(self, call: Any, wait: float = 0) -> Any:
        try:
            return await asyncio.wait_for(call, self.timeout + wait)
        except (TimeoutError, ClientError, OSError, sync_token.SyncTokenError) as exc:
            raise RetryLater(f"Matrix did not answer: {exc!r}", NETWORK_RETRY) from exc
        except (LocalProtocolError, OlmUnverifiedDeviceError) as exc:  # e.g. a device new
            raise RetryLater(f"Matrix: {exc}", NETWORK_RETRY) from exc  # since: next time

    async def close(self) -> None:
        await self.client.close()


def _client(settings: ChannelsSettings) -> AsyncClient:
    # nio would sleep through 429s and retry timeouts itself; the service decides instead.
    config = AsyncClientConfig(
        max_limit_exceeded=0,
        max_timeouts=0,
        request_timeout=settings.call_timeout,
        encryption_enabled=ENCRYPTION_ENABLED,
        store_sync_tokens=False,
    )
    store = str(private_dir(settings.matrix_store_dir)) if ENCRYPTION_ENABLED else ""
    client = AsyncClient(settings.matrix_homeserver.rstrip("/"), store_path=store, config=config)
    client.access_token = settings.matrix_access_token
    return client


def _room(chat_id: str) -> str:
    try:
        return rooms.room_id_of(chat_id)
    except ValueError as exc:
        raise PlatformRefused(f"not a Matrix chat id: {chat_id!r}") from exc


def _formatted(markdown: str) -> dict[str, str]:
    """The text as Matrix HTML, and as the plain text a client without HTML shows."""
    formatted = to_html(markdown)
    plain = html.unescape(re.sub(r"<[^>]+>", "", formatted))
    return {"body": plain, "format": "org.matrix.custom.html", "formatted_body": formatted}


def _mapped(reply: ErrorResponse) -> Exception:
    transport = getattr(reply, "transport_response", None)
    status = transport.status if transport is not None else 0
    if reply.status_code == "M_LIMIT_EXCEEDED" or status == 429:
        wait = (reply.retry_after_ms or 0) / 1000 or LIMIT_DEFAULT
        return RetryLater(f"Matrix: {reply}", wait)
    if status >= 500:
        return RetryLater(f"Matrix: {reply}", NETWORK_RETRY)
    if reply.status_code == "M_UNKNOWN_TOKEN":
        return PlatformRefused(f"Matrix refused the access token: {reply}")
    return PlatformRefused(f"Matrix: {reply}")
