"""Feishu/Lark through lark-oapi: messages in over its event long connection (events.py; their
images and files as attachments, content.py, read by resources.py), the IM API out (`post`
messages with one `md` element, so Feishu renders the Markdown; a streamed answer is edited
with PUT; pictures uploaded, then sent as `image` messages), a "Typing" reaction on the
person's message as typing. The tenant token is fetched here, not by the SDK (token.py)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import lark_oapi as lark
from lark_oapi.api.im.v1 import (
    CreateImageRequest,
    CreateImageRequestBody,
    CreateMessageReactionRequest,
    CreateMessageReactionRequestBody,
    CreateMessageRequest,
    CreateMessageRequestBody,
    Emoji,
    GetMessageRequest,
    P2ImMessageReceiveV1,
    UpdateMessageRequest,
    UpdateMessageRequestBody,
)

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
from channels.feishu.content import content_of
from channels.feishu.events import LongConnection
from channels.feishu.resources import download
from channels.feishu.token import STALE, TenantToken

log = logging.getLogger(__name__)
# A post message may carry 30 KB of JSON; Markdown beyond a few thousand characters is hard
# to read in one bubble anyway.
TEXT_LIMIT = 4000
RATE_LIMITED = 99991400  # Feishu's "request trigger frequency limit"
RETRY = 2.0
MENTION_KEY = "@_user_"


class FeishuChannel(Channel):
    name = "feishu"
    text_limit = TEXT_LIMIT

    def __init__(self, settings: ChannelsSettings):
        self.access = Access.parse(
            settings.feishu_dm_policy, settings.feishu_allow_from, settings.feishu_open_groups
        )
        domain = settings.feishu_domain.rstrip("/")
        self.client = (
            lark.Client.builder()
            .app_id(settings.feishu_app_id)
            .app_secret(settings.feishu_app_secret)
            .domain(domain)
            .timeout(settings.call_timeout)
            .enable_set_token(True)  # the token comes from TenantToken, with each call
            .log_level(lark.LogLevel.WARNING)
            .build()
        )
        self.domain = domain
        self.http = httpx.AsyncClient(timeout=settings.call_timeout, follow_redirects=False)
        self.token = TenantToken(
            self.http,
            domain,
            settings.feishu_app_id,
            settings.feishu_app_secret,
            settings.call_timeout,
        )
        self.events = LongConnection(
            settings.feishu_app_id, settings.feishu_app_secret, domain, 2 * settings.call_timeout
        )
        self.bot_open_id = ""
        self.latest: dict[str, str] = {}  # chat → the person's latest message (for typing)
        self.reacted: set[str] = set()

    async def start(self) -> None:
        request = (
            lark.BaseRequest.builder()
            .http_method(lark.HttpMethod.GET)
            .uri("/open-apis/bot/v3/info")
            .token_types({lark.AccessTokenType.TENANT})
            .build()
        )
        answer = await self._call(lambda option: self.client.arequest(request, option))
        body = json.loads(answer.raw.content or b"{}")
        if body.get("code") != 0:
            raise PlatformRefused(f"Feishu bot info: {body.get('code')} {body.get('msg')}")
        self.bot_open_id = str(body["bot"]["open_id"])
        log.info("feishu: connected as %s", body["bot"].get("app_name", self.bot_open_id))

    async def receive(self, inbox: Inbox) -> None:
        async def handle(event: P2ImMessageReceiveV1) -> None:
            inbound = await self.inbound(event)
            if inbound is not None:
                await inbox(inbound)

        await self.events.run(handle)

    async def inbound(self, event: P2ImMessageReceiveV1) -> Inbound | None:
        """The event as an Inbound; None for what is not a person's text, post, image or file."""
        data = event.event
        if data is None or data.message is None or data.sender is None:
            return None
        message, sender = data.message, data.sender
        if sender.sender_type != "user":
            return None
        said = content_of(
            str(message.message_type), str(message.content or ""), str(message.message_id)
        )
        if said is None or not (said.text.strip() or said.attachments):
            return None
        text = said.text
        mentions = message.mentions or []
        mentioned = any(m.id is not None and m.id.open_id == self.bot_open_id for m in mentions)
        for mention in mentions:  # `@_user_1` placeholders: the bot's dropped, others named
            name = "" if mention.id and mention.id.open_id == self.bot_open_id else mention.name
            text = text.replace(str(mention.key), f"@{name}" if name else "")
        group = message.chat_type != "p2p"
        addressed = not group or mentioned
        if group and not addressed and message.parent_id:
            addressed = await self._from_me(str(message.parent_id))
        self.latest[str(message.chat_id)] = str(message.message_id)
        sender_id = sender.sender_id.open_id if sender.sender_id else ""
        return Inbound(
            chat_id=str(message.chat_id),
            message_id=str(message.message_id),
            sender_id=str(sender_id or ""),
            text=text.strip(),
            group=group,
            addressed=addressed,
            thread_id=str(message.thread_id or ""),
            attachments=said.attachments,
        )

    async def _from_me(self, message_id: str) -> bool:
        request = GetMessageRequest.builder().message_id(message_id).build()
        try:
            answer = await self._call(
                lambda option: self.client.im.v1.message.aget(request, option)
            )
        except PlatformRefused:  # not a message the bot can see
            return False
        items = (answer.data.items or []) if answer.data else []
        return any(i.sender is not None and i.sender.sender_type == "app" for i in items)

    async def send(self, chat_id: str, markdown: str) -> str:
        return await self._create(chat_id, "post", _post(markdown))

    async def send_image(self, chat_id: str, picture: Picture) -> str:
        """Uploads the bytes (`POST /im/v1/images`), then sends an `image` message. Feishu
        shows only uploaded images, and this service never fetches a URL a model wrote: a
        URL is refused (the answer's text keeps the link)."""
        if not picture.data:
            raise PlatformRefused("Feishu shows only uploaded images; the link stays in the text")
        body = CreateImageRequestBody.builder().image_type("message")
        request = CreateImageRequest.builder().request_body(
            body.image(io.BytesIO(picture.data)).build()
        )
        uploaded = await self._call(
            lambda option: self.client.im.v1.image.acreate(request.build(), option)
        )
        content = json.dumps({"image_key": uploaded.data.image_key})
        return await self._create(chat_id, "image", content)

    async def fetch(self, attachment: Attachment, max_bytes: int) -> bytes:
        return await download(self.http, self.domain, self.token, attachment, max_bytes)

    async def _create(self, chat_id: str, msg_type: str, content: str) -> str:
        body = (
            CreateMessageRequestBody.builder()
            .receive_id(chat_id)
            .msg_type(msg_type)
            .content(content)
            .build()
        )
        request = CreateMessageRequest.builder().receive_id_type("chat_id").request_body(body)
        answer = await self._call(
            lambda option: self.client.im.v1.message.acreate(request.build(), option)
        )
        return str(answer.data.message_id)

    async def edit(self, chat_id: str, message_id: str, markdown: str) -> None:
        body = UpdateMessageRequestBody.builder().msg_type("post").content(_post(markdown))
        request = UpdateMessageRequest.builder().message_id(message_id).request_body(body.build())
        await self._call(lambda option: self.client.im.v1.message.aupdate(request.build(), option))

    async def typing(self, chat_id: str) -> None:
        """Feishu has no typing indicator: a "Typing" reaction on the message being answered."""
        message_id = self.latest.get(chat_id)
        if message_id is None or message_id in self.reacted:
            return
        emoji = Emoji.builder().emoji_type("Typing").build()
        body = CreateMessageReactionRequestBody.builder().reaction_type(emoji).build()
        request = CreateMessageReactionRequest.builder().message_id(message_id).request_body(body)
        await self._call(
            lambda option: self.client.im.v1.message_reaction.acreate(request.build(), option)
        )
        self.reacted.add(message_id)

    async def _call(self, call: Callable[[lark.RequestOption], Awaitable[Any]]) -> Any:
        """One API call with the tenant token, its errors mapped: a rate limit, a stale token
        or no answer waits, else refused."""
        token = await self.token.get()
        option = lark.RequestOption.builder().tenant_access_token(token).build()
        try:
            answer = await call(option)
        except Exception as exc:  # httpx's timeouts and connection errors, through the SDK
            raise RetryLater(f"Feishu did not answer: {exc}", RETRY) from exc
        if answer.success():
            return answer
        if answer.code in STALE:
            self.token.forget(token)
            raise RetryLater(f"Feishu refused the token: {answer.code} {answer.msg}", RETRY)
        if answer.code == RATE_LIMITED or (answer.raw and answer.raw.status_code == 429):
            reset = (
                (answer.raw.headers or {}).get("x-ogw-ratelimit-reset", "") if answer.raw else ""
            )
            raise RetryLater(f"Feishu: {answer.msg}", float(reset or RETRY))
        if answer.raw is not None and answer.raw.status_code >= 500:
            raise RetryLater(f"Feishu: {answer.code} {answer.msg}", RETRY)
        raise PlatformRefused(f"Feishu refused: {answer.code} {answer.msg}")

    async def close(self) -> None:
        await self.http.aclose()  # the SDK's thread is a daemon and ends with the process


def _post(markdown: str) -> str:
    return json.dumps({"zh_cn": {"title": "", "content": [[{"tag": "md", "text": markdown}]]}})
