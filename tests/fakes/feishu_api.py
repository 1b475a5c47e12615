"""A fake Feishu open platform on loopback: the HTTP API the channel uses and the event long
connection, in their documented wire formats (https://open.feishu.cn/document: auth v3
tenant_access_token, bot v3 info, im v1 messages create/update/get and reactions; the long
connection's endpoint `POST /callback/ws/endpoint` and its protobuf frames, pbbp2.Frame).

Each person's message is an `im.message.receive_v1` event (schema 2.0) in a DATA frame; it
stays pending until the client answers the frame with code 200, and is sent again to the next
connection while it is not. Answers `{"code": 0, "msg", "data"}`, or Feishu's errors: a wrong
secret (10014), a missing token (99991661), an unknown chat (230002), a rate limit (HTTP 429,
99991400, `x-ogw-ratelimit-reset`). Tests inject rate limits (`flood`), calls that never
answer (`hang`), a token endpoint that hangs (`hang_token`) and acknowledgements lost on the
way (`hold_acks`). Images and files: feishu_media.py."""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from lark_oapi.ws.pb.pbbp2_pb2 import Frame
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import Server, ServerConnection

from tests.fakes.feishu_media import ApiError, Binary, FeishuMedia
from tests.fakes.platform_base import (
    FakePlatform,
    QuietHandler,
    http_url,
    request_fields,
    start_http,
    start_ws,
    stop_http,
    ws_url,
)

APP_ID, APP_SECRET = "cli_test_app", "test-secret"
BOT_OPEN_ID = "ou_crayfish_bot"
TENANT_TOKEN = "t-fake-tenant-token"
TEXT_LIMIT = 4000
MD_MARKS = re.compile(r"\*\*|__|~~|`")
MD_LINK = re.compile(r"\[([^\]]+)\]\(([^)]+)\)")


@dataclass
class Shown:
    message_id: str
    chat_id: str
    markdown: str
    text: str  # as the person sees it
    at: float


class FakeFeishu(FakePlatform):
    """Floods and hung calls are of "message": sends, updates and reactions in a chat."""

    label = "Feishu"

    def __init__(self) -> None:
        super().__init__()
        self.chats: set[str] = set()
        self.pending: dict[str, dict[str, Any]] = {}  # message_id → event, not yet acknowledged
        self.handed: dict[str, int] = {}
        self.origin: dict[str, str] = {}  # a person's message id → its chat
        self.shown: list[Shown] = []
        self.reactions: list[tuple[str, str, float]] = []  # chat, emoji, time
        self.calls: list[tuple[str, str, int]] = []
        self.token_open = threading.Event()  # cleared: the token endpoint never answers
        self.token_open.set()
        self.token_requests = 0
        self.media = FeishuMedia()
        self.clients: list[ServerConnection] = []
        self._ids = itertools.count(1)
        self._http: ThreadingHTTPServer | None = None
        self._ws: Server | None = None

    def __enter__(self) -> FakeFeishu:
        self._http = start_http(_Handler, fake=self)
        self._ws = start_ws(self._serve)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self.token_open.set()
        stop_http(self._http)
        if self._ws is not None:
            self._ws.shutdown()

    @property
    def url(self) -> str:
        return http_url(self._http)

    # -- what tests do ----------------------------------------------------------------------
    def user_says(
        self, text: str, open_id: str, chat_id: str, group: bool, mention: bool, reply_to: str
    ) -> str:
        mentions = []
        if mention:
            text = f"@_user_1 {text}"
            mentions = [{"key": "@_user_1", "id": {"open_id": BOT_OPEN_ID}, "name": "Crayfish"}]
        content = json.dumps({"text": text})
        return self._says("text", content, open_id, chat_id, group, mentions, reply_to)

    def user_sends_file(
        self, data: bytes, name: str, open_id: str, caption: str = "", image: bool = True
    ) -> str:
        """A person's picture (a post when it has a caption) or file in their direct chat."""
        with self.lock:
            message_id = f"om_{next(self._ids)}"
        kind, content = self.media.message(message_id, data, name, caption, image)
        return self._says(kind, content, open_id, open_id, False, [], "", message_id)

    def hang_token(self, hang: bool = True) -> None:
        """While hung, the token endpoint takes requests and never answers them."""
        if hang:
            self.token_open.clear()
        else:
            self.token_open.set()

    def _says(
        self,
        message_type: str,
        content: str,
        open_id: str,
        chat_id: str,
        group: bool,
        mentions: list[dict[str, Any]],
        reply_to: str,
        message_id: str = "",
    ) -> str:
        with self.lock:
            message_id = message_id or f"om_{next(self._ids)}"
            message = {
                "message_id": message_id,
                "parent_id": reply_to,
                "root_id": reply_to,
                "create_time": str(int(time.time() * 1000)),
                "chat_id": chat_id,
                "chat_type": "group" if group else "p2p",
                "message_type": message_type,
                "content": content,
                "mentions": mentions,
            }
            sender = {"sender_id": {"open_id": open_id}, "sender_type": "user"}
            event = {
                "schema": "2.0",
                "header": {
                    "event_id": f"ev_{message_id}",
                    "event_type": "im.message.receive_v1",
                    "create_time": message["create_time"],
                    "app_id": APP_ID,
                    "tenant_key": "tenant",
                },
                "event": {"sender": sender, "message": message},
            }
            self.chats.add(chat_id)
            self.pending[message_id] = event
            self.handed[message_id] = 0
            self.origin[message_id] = chat_id
            clients = list(self.clients)
        for client in clients:
            self._push(client, message_id)
        return message_id

    def last_bot_message(self, chat_id: str) -> str:
        with self.lock:
            mine = [m.message_id for m in self.shown if m.chat_id == chat_id]
        return mine[-1] if mine else ""

    def texts(self, chat_id: str) -> list[str]:
        with self.lock:
            return [m.text for m in self.shown if m.chat_id == chat_id]

    def first_sign(self, chat_id: str, after: float) -> float | None:
        with self.lock:
            times = [t for c, _, t in self.reactions if c == chat_id and t >= after]
            times += [m.at for m in self.shown if m.chat_id == chat_id and m.at >= after]
        return min(times, default=None)

    # -- the long connection ----------------------------------------------------------------
    def _serve(self, client: ServerConnection) -> None:
        with self.lock:
            self.clients.append(client)
            waiting = list(self.pending)
        for message_id in waiting:  # what was never acknowledged is sent again
            self._push(client, message_id)
        try:
            for data in client:
                self._on_frame(client, data)
        except ConnectionClosed:
            pass
        finally:
            with self.lock:
                self.clients.remove(client)

    def _push(self, client: ServerConnection, message_id: str) -> None:
        with self.lock:
            event = self.pending.get(message_id)
            if event is None:
                return
            self.handed[message_id] += 1
        frame = Frame(SeqID=0, LogID=0, service=1, method=1, payload=json.dumps(event).encode())
        for key, value in (
            ("type", "event"),
            ("message_id", message_id),
            ("sum", "1"),
            ("seq", "0"),
            ("trace_id", f"trace-{message_id}"),
        ):
            header = frame.headers.add()
            header.key, header.value = key, value
        try:
            client.send(frame.SerializeToString())
        except ConnectionClosed:
            pass

    def _on_frame(self, client: ServerConnection, data: bytes | str) -> None:
        frame = Frame()
        frame.ParseFromString(data if isinstance(data, bytes) else data.encode())
        headers = {h.key: h.value for h in frame.headers}
        if frame.method == 0:  # CONTROL: a ping gets a pong
            if headers.get("type") == "ping":
                pong = Frame(SeqID=0, LogID=0, service=frame.service, method=0)
                header = pong.headers.add()
                header.key, header.value = "type", "pong"
                client.send(pong.SerializeToString())
            return
        answer = json.loads(frame.payload or b"{}")
        with self.lock:
            if self.hold_acks:
                return  # lost on the way: the event stays pending
            if answer.get("code") == 200:
                self.pending.pop(headers.get("message_id", ""), None)
            self.lock.notify_all()

    # -- the HTTP API -----------------------------------------------------------------------
    def call(
        self, method: str, path: str, query: dict[str, str], body: dict[str, Any], auth: str
    ) -> Any:
        if path == "/callback/ws/endpoint":
            if body.get("AppID") != APP_ID or body.get("AppSecret") != APP_SECRET:
                raise ApiError(200, 514, "auth failed")
            config = {
                "ReconnectCount": -1,
                "ReconnectInterval": 1,
                "ReconnectNonce": 0,
                "PingInterval": 30,
            }
            return {
                "URL": f"{ws_url(self._ws)}/ws?device_id=d1&service_id=1",
                "ClientConfig": config,
            }
        if path == "/open-apis/auth/v3/tenant_access_token/internal":
            with self.lock:
                self.token_requests += 1
                self.lock.notify_all()
            self.token_open.wait()
            if body.get("app_id") != APP_ID or body.get("app_secret") != APP_SECRET:
                raise ApiError(400, 10014, "app secret invalid")
            return {"tenant_access_token": TENANT_TOKEN, "expire": 7200}
        if auth != f"Bearer {TENANT_TOKEN}":
            raise ApiError(400, 99991661, "Missing access token for authorization")
        if path == "/open-apis/bot/v3/info":
            return {"bot": {"open_id": BOT_OPEN_ID, "app_name": "Crayfish"}}
        if path.endswith("/reactions"):
            return self._react(path.split("/")[-2], body)
        if path == "/open-apis/im/v1/messages" and method == "POST":
            return self._send(str(body.get("receive_id")), body)
        if path == "/open-apis/im/v1/images" and method == "POST":
            return self.media.upload(body)
        resource = re.fullmatch(r"/open-apis/im/v1/messages/(om_\w+)/resources/(\w+)", path)
        if resource and method == "GET":
            return self.media.resource(resource[1], resource[2], query.get("type", ""))
        found = re.fullmatch(r"/open-apis/im/v1/messages/(om_\w+)", path)
        if found and method == "PUT":
            return self._update(found[1], body)
        if found and method == "GET":
            return self._get(found[1])
        raise ApiError(404, 404, "not found")

    def _gate(self, chat_id: str) -> None:
        if self.is_hung("message", chat_id):
            self.released.wait()
            raise ApiError(502, 1, "bad gateway")
        with self.lock:
            if chat_id not in self.chats:
                raise ApiError(400, 230002, "Bot/User can NOT be out of the chat.")
            wait = self.next_flood("message")
            if wait is not None:
                raise ApiError(
                    429,
                    99991400,
                    "request trigger frequency limit",
                    {"x-ogw-ratelimit-reset": str(wait)},
                )

    def _send(self, chat_id: str, body: dict[str, Any]) -> Any:
        self._gate(chat_id)
        if body.get("msg_type") == "image":
            self.media.show(chat_id, str(body.get("content") or ""))
            with self.lock:
                self.lock.notify_all()
                return {"message_id": f"om_{next(self._ids)}", "chat_id": chat_id}
        markdown = _post_markdown(body)
        with self.lock:
            shown = Shown(
                f"om_{next(self._ids)}", chat_id, markdown, _rendered(markdown), time.monotonic()
            )
            self.shown.append(shown)
            self.lock.notify_all()
        return _message_json(shown)

    def _update(self, message_id: str, body: dict[str, Any]) -> Any:
        markdown = _post_markdown(body)
        with self.lock:
            found = [m for m in self.shown if m.message_id == message_id]
            if not found:
                raise ApiError(400, 230001, "message not found")
        self._gate(found[0].chat_id)
        with self.lock:
            found[0].markdown, found[0].text = markdown, _rendered(markdown)
            self.lock.notify_all()
        return _message_json(found[0])

    def _get(self, message_id: str) -> Any:
        with self.lock:
            mine = [m for m in self.shown if m.message_id == message_id]
        if not mine:
            raise ApiError(400, 230001, "message not found")
        item = _message_json(mine[0])
        return {"items": [item]}

    def _react(self, message_id: str, body: dict[str, Any]) -> Any:
        with self.lock:
            chat = self.origin.get(message_id)
        if chat is None:
            raise ApiError(400, 231001, "message not found")
        self._gate(chat)
        emoji = str(body.get("reaction_type", {}).get("emoji_type", ""))
        with self.lock:
            self.reactions.append((chat, emoji, time.monotonic()))
            self.lock.notify_all()
        return {"reaction_id": f"r_{next(self._ids)}", "reaction_type": {"emoji_type": emoji}}


def _post_markdown(body: dict[str, Any]) -> str:
    if body.get("msg_type") != "post":
        raise ApiError(400, 230001, "this fake takes post messages")
    content = json.loads(str(body.get("content") or "{}"))
    rows = content.get("zh_cn", {}).get("content", [])
    markdown = "\n".join(str(e.get("text", "")) for row in rows for e in row)
    if not markdown.strip() or len(markdown) > TEXT_LIMIT:
        raise ApiError(400, 230025, f"message content is empty or too long ({len(markdown)})")
    return markdown


def _rendered(markdown: str) -> str:
    """What Feishu shows of a post's md element: marks gone, links as their text."""
    return MD_MARKS.sub("", MD_LINK.sub(r"\1", markdown))


def _message_json(shown: Shown) -> dict[str, Any]:
    return {
        "message_id": shown.message_id,
        "chat_id": shown.chat_id,
        "msg_type": "post",
        "sender": {"id": APP_ID, "id_type": "app_id", "sender_type": "app"},
    }


class _Handler(QuietHandler):
    fake: FakeFeishu

    def answer(self, method: str) -> None:
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        status, headers, data = 200, {}, None
        try:
            try:
                body = request_fields(self.headers.get("content-type") or "", self.body())
            except ValueError as exc:
                raise ApiError(400, 99992402, f"field validation failed: {exc}") from None
            data = self.fake.call(
                method, parts.path, query, body, self.headers.get("Authorization", "")
            )
            if parts.path.endswith("tenant_access_token/internal"):
                answer = {"code": 0, "msg": "ok", **data}
            elif parts.path == "/open-apis/bot/v3/info":
                answer = {"code": 0, "msg": "ok", **data}
            else:
                answer = {"code": 0, "msg": "success", "data": data}
        except ApiError as exc:
            status, headers = exc.status, exc.headers
            answer = {"code": exc.code, "msg": exc.msg}
        with self.fake.lock:
            self.fake.calls.append((method, parts.path, status))
        content_type = "application/json"
        if isinstance(data, Binary) and status == 200:
            raw, content_type = data.data, "application/octet-stream"
            headers = {"content-disposition": f'attachment; filename="{data.name}"'}
        else:
            raw = json.dumps(answer).encode()
        self.reply(status, raw, content_type, headers)
