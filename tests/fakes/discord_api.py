"""A fake Discord on loopback: the REST API (`/api/v10/…`, `Authorization: Bot <token>`, JSON
errors `{"code", "message"}`, 429 with `retry_after` and Cloudflare's `Via` header as Discord
sends it) and the gateway WebSocket (HELLO, IDENTIFY → READY, RESUME → the missed dispatches then
RESUMED, heartbeats → HEARTBEAT_ACK, MESSAGE_CREATE dispatches with a sequence number per session).

Like Discord it keeps a session's dispatches after its socket drops, so a RESUME with the last
sequence the client handled gets everything after it again. It rejects an unknown token (401,
and gateway close 4004), content over 2000 characters or empty (400, code 50035/50006), unknown
channels (10003) and messages (10008). Tests inject users' messages, 429s and calls that hang.

Files: a person's attachments carry `url` and `proxy_url` on the fake's CDN, another host
(127.0.0.3), with Discord's signed query (`ex`, `is`, `hm`): one without a valid signature is a 404,
and the CDN records every request's `Authorization` header (Discord's CDN needs none). A message
with files is `multipart/form-data`: a `payload_json` part and `files[n]` parts, each named in
`payload_json`'s `attachments` by `id` n; a file over 10 MiB is a 413 (code 40005). An embed's
image must be an http(s) or `attachment://` URL (50035 otherwise).

DM channels get the person's own id as their id, for readable tests; Discord would give another
snowflake (the channel never assumes they are equal)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.platform_base import AioServer, FakePlatform, Upload, request_fields

BOT_ID = "7000002"
BOT_NAME = "crayfish-test"
TEXT_LIMIT = 2000
HEARTBEAT_MS = 1000
FILE_MAX = 10 * 1024 * 1024  # a bot's upload limit
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
CDN_SECRET = b"fake-cdn-secret"
MARKUP = re.compile(r"\*\*|__|~~|`+|(?<!\w)\*(?=\S)|(?<=\S)\*(?!\w)|^#{1,3} ", re.M)


@dataclass
class Shown:
    """A message the bot shows in a channel: its current content and when it first showed."""

    message_id: str
    chat_id: str
    content: str
    at: float = 0.0

    @property
    def text(self) -> str:
        """What a person reads: Discord's Markdown rendered (markers gone)."""
        return MARKUP.sub("", self.content)


@dataclass
class Session:
    session_id: str
    events: list[dict[str, Any]] = field(default_factory=list)  # every dispatch, seq = index+1
    ws: web.WebSocketResponse | None = None


class FakeDiscord(FakePlatform):
    """Floods are of "message" (sends and edits); hung calls are "channel" ones in a chat."""

    label = "Discord"

    def __init__(self, token: str = "TEST.discord.token"):
        super().__init__()
        self.token = token
        self.sessions: dict[str, Session] = {}
        self.handed: dict[str, int] = {}  # message id → times a dispatch carried it
        self.next_id = 900000
        self.channels: dict[str, dict[str, Any]] = {}
        self.shown: list[Shown] = []
        self.typing: list[tuple[str, float]] = []  # channel, monotonic time
        self.calls: list[tuple[str, str, int]] = []  # method, path, status
        self.heartbeats = 0
        self.cdn_files: dict[str, bytes] = {}  # CDN path → bytes
        self.cdn_requests: list[tuple[str, str]] = []  # path, Authorization header ("": none)
        self.uploads: list[tuple[str, str, bytes]] = []  # channel, filename, bytes the bot sent
        self.pictures: list[tuple[str, bytes | str]] = []  # channel, image bytes or embed URL
        self.cdn_port = 0
        self._server = AioServer()
        self._loop = self._server.loop
        self.port = 0

    # -- lifecycle --------------------------------------------------------------------------
    def __enter__(self) -> FakeDiscord:
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", "/api/v10/{path:.*}", self._rest)
        app.router.add_get("/attachments/{path:.*}", self._cdn)
        # 127.0.0.3: cdn.discordapp.com's stand-in
        self.port, self.cdn_port = self._server.start(app, "127.0.0.1", "127.0.0.3")
        return self

    def __exit__(self, *exc: object) -> None:
        async def close_sockets() -> None:
            for session in self.sessions.values():
                if session.ws is not None:
                    await session.ws.close()

        self.release()
        self._server.stop(close_sockets)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    # -- what tests do ----------------------------------------------------------------------
    def user_says(
        self,
        text: str,
        user_id: str,
        chat_id: str | None = None,
        group: bool = False,
        mention: bool = False,
        reply_to_bot: bool = False,
        attachments: list[dict[str, Any]] | None = None,
    ) -> str:
        """A person's message, dispatched as MESSAGE_CREATE to every session; returns its id.
        Discord dispatches only to sessions: one said before the bot ever connected would be
        lost, so this waits for the first IDENTIFY (a session that dropped keeps it)."""
        self.wait_for(lambda: bool(self.sessions))
        chat_id = chat_id or user_id
        bot = {"id": BOT_ID, "username": BOT_NAME, "bot": True}
        with self.lock:
            self.channels[chat_id] = {"id": chat_id, "type": 0 if group else 1}
            message_id = self._id()
        message: dict[str, Any] = {
            "id": message_id,
            "channel_id": chat_id,
            "author": {"id": user_id, "username": f"user{user_id}", "global_name": "A Person"},
            "content": f"<@{BOT_ID}> {text}" if mention else text,
            "timestamp": "2026-01-01T00:00:00+00:00",
            "mentions": [bot] if mention else [],
            "type": 19 if reply_to_bot else 0,
            "attachments": attachments or [],
        }
        if group:
            message["guild_id"] = "42"
        if reply_to_bot:
            earlier = {"id": "1", "channel_id": chat_id, "author": bot, "content": "earlier"}
            message["referenced_message"] = earlier
            message["message_reference"] = {"message_id": "1", "channel_id": chat_id}
            message["mentions"] = [bot]  # a reply pings its author, as Discord's default
        asyncio.run_coroutine_threadsafe(self._dispatch("MESSAGE_CREATE", message), self._loop)
        return message_id

    def user_sends_file(
        self,
        data: bytes,
        name: str,
        user_id: str,
        caption: str = "",
        content_type: str = "",
        stated_size: int | None = None,
    ) -> str:
        """A person's message with one attachment (in their DM); returns its id."""
        with self.lock:
            attachment_id = self._id()
            path = f"/attachments/{user_id}/{attachment_id}/{name}"
            self.cdn_files[path] = data
        expires = f"{int(time.time()) + 86400:x}"
        signature = hmac.new(CDN_SECRET, f"{path}{expires}".encode(), hashlib.sha256).hexdigest()
        query = f"?ex={expires}&is={int(time.time()):x}&hm={signature}&"
        attachment = {
            "id": attachment_id,
            "filename": name,
            "size": len(data) if stated_size is None else stated_size,
            "url": f"http://127.0.0.3:{self.cdn_port}{path}{query}",
            "proxy_url": f"http://127.0.0.3:{self.cdn_port}{path}{query}",
        }
        if content_type:
            attachment["content_type"] = content_type
        return self.user_says(caption, user_id, attachments=[attachment])

    def texts(self, chat_id: str) -> list[str]:
        with self.lock:
            return [m.text for m in self.shown if m.chat_id == chat_id]

    def first_sign(self, chat_id: str, after: float) -> float | None:
        with self.lock:
            times = [at for c, at in self.typing if c == chat_id and at >= after]
            times += [m.at for m in self.shown if m.chat_id == chat_id and m.at >= after]
        return min(times, default=None)

    # -- the gateway ------------------------------------------------------------------------
    async def _dispatch(self, event: str, data: dict[str, Any]) -> None:
        for session in list(self.sessions.values()):
            session.events.append({"op": 0, "t": event, "d": data})
            await self._send_event(session, len(session.events))

    async def _send_event(self, session: Session, seq: int) -> None:
        if session.ws is None or session.ws.closed:
            return  # kept: a RESUME gets it
        event = {**session.events[seq - 1], "s": seq}
        if event["t"] == "MESSAGE_CREATE":
            with self.lock:
                message_id = event["d"]["id"]
                self.handed[message_id] = self.handed.get(message_id, 0) + 1
        await session.ws.send_json(event)

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json({"op": 10, "d": {"heartbeat_interval": HEARTBEAT_MS}, "s": None})
        session: Session | None = None
        async for frame in ws:
            if frame.type != WSMsgType.TEXT:
                break
            payload = json.loads(frame.data)
            op, data = payload.get("op"), payload.get("d")
            if op == 1:
                self.heartbeats += 1
                await ws.send_json({"op": 11, "d": None})
            elif op in (2, 6) and data.get("token") != self.token:
                await ws.close(code=4004, message=b"Authentication failed.")
            elif op == 2:
                session = Session(uuid.uuid4().hex)
                self.sessions[session.session_id] = session
                session.ws = ws
                await self._ready(session)
            elif op == 6:
                session = self.sessions.get(data.get("session_id", ""))
                if session is None:
                    await ws.send_json({"op": 9, "d": False})
                    continue
                session.ws = ws
                for seq in range(int(data.get("seq") or 0) + 1, len(session.events) + 1):
                    await self._send_event(session, seq)
                session.events.append({"op": 0, "t": "RESUMED", "d": {}})
                await self._send_event(session, len(session.events))
        if session is not None and session.ws is ws:
            session.ws = None
        return ws

    async def _ready(self, session: Session) -> None:
        ready = {
            "v": 10,
            "user": {"id": BOT_ID, "username": BOT_NAME, "bot": True},
            "session_id": session.session_id,
            "resume_gateway_url": f"ws://127.0.0.1:{self.port}/gateway",
            "guilds": [],
            "application": {"id": BOT_ID, "flags": 0},
        }
        session.events.append({"op": 0, "t": "READY", "d": ready})
        await self._send_event(session, len(session.events))

    # -- the CDN ----------------------------------------------------------------------------
    async def _cdn(self, request: web.Request) -> web.Response:
        with self.lock:
            self.cdn_requests.append((request.path, request.headers.get("Authorization", "")))
            data = self.cdn_files.get(request.path)
        expires = request.query.get("ex", "")
        wanted = hmac.new(CDN_SECRET, f"{request.path}{expires}".encode(), hashlib.sha256)
        signed = hmac.compare_digest(wanted.hexdigest(), request.query.get("hm", ""))
        if data is None or request.url.port != self.cdn_port or not signed:
            return web.Response(status=404, text="This content is no longer available.")
        return web.Response(body=data, content_type="application/octet-stream")

    # -- the REST API -----------------------------------------------------------------------
    async def _rest(self, request: web.Request) -> web.Response:
        path = "/" + request.match_info["path"]
        reply = await self._answer(request, path)
        with self.lock:
            self.calls.append((request.method, path, reply.status))
        return reply

    async def _answer(self, request: web.Request, path: str) -> web.Response:
        if request.headers.get("Authorization") != f"Bot {self.token}":
            return _error(401, 0, "401: Unauthorized")
        if request.method == "GET" and path == "/users/@me":
            return _json({"id": BOT_ID, "username": BOT_NAME, "bot": True})
        if request.method == "GET" and path == "/gateway/bot":
            limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
            url = f"ws://127.0.0.1:{self.port}/gateway"
            return _json({"url": url, "shards": 1, "session_start_limit": limit})
        found = re.fullmatch(r"/channels/([-\d]+)/(messages|typing)(?:/(\d+))?", path)
        if found is None:
            return _error(404, 0, "404: Not Found")
        chat_id, kind, message_id = found.groups()
        if self.is_hung("channel", chat_id):
            await asyncio.to_thread(self.released.wait)
        if chat_id not in self.channels:
            return _error(404, 10003, "Unknown Channel")
        if kind == "typing" and request.method == "POST":
            with self.lock:
                self.typing.append((chat_id, time.monotonic()))
            return web.Response(status=204)
        with self.lock:
            retry_after = self.next_flood("message")
            if retry_after is not None:
                body = {"message": "You are being rate limited.", "retry_after": retry_after}
                return _json({**body, "global": False}, status=429, headers={"Via": "1.1 google"})
        return await self._message(request, chat_id, message_id)

    async def _message(
        self, request: web.Request, chat_id: str, message_id: str | None
    ) -> web.Response:
        body, files = _message_body(request.headers.get("content-type", ""), await request.read())
        content = body.get("content") or ""
        refused = _refused_files(body, files)
        if refused is not None:
            return refused
        if files or body.get("embeds"):
            return self._with_files(chat_id, body, files)
        if not content.strip():
            return _error(400, 50006, "Cannot send an empty message")
        if len(content) > TEXT_LIMIT:
            refused = "Invalid Form Body: content: Must be 2000 or fewer in length."
            return _error(400, 50035, refused)
        with self.lock:
            if request.method == "POST" and message_id is None:
                shown = Shown(self._id(), chat_id, content, time.monotonic())
                self.shown.append(shown)
            elif request.method == "PATCH" and message_id is not None:
                mine = [m for m in self.shown if m.message_id == message_id]
                if not mine or mine[0].chat_id != chat_id:
                    return _error(404, 10008, "Unknown Message")
                shown = mine[0]
                shown.content = content
            else:
                return _error(405, 0, "405: Method Not Allowed")
        author = {"id": BOT_ID, "username": BOT_NAME, "bot": True}
        return _json(
            {"id": shown.message_id, "channel_id": chat_id, "content": content, "author": author}
        )

    def _with_files(
        self, chat_id: str, body: dict[str, Any], files: dict[int, tuple[str, bytes]]
    ) -> web.Response:
        """A new message with attachments or embeds; its content, if any, is not shown as text."""
        with self.lock:
            message_id = self._id()
            for name, data in files.values():
                self.uploads.append((chat_id, name, data))
                if name.lower().endswith(IMAGE_SUFFIXES):
                    self.pictures.append((chat_id, data))
            for embed in body.get("embeds") or []:
                if (embed.get("image") or {}).get("url"):
                    self.pictures.append((chat_id, embed["image"]["url"]))
            self.lock.notify_all()
        attachments = [{"id": str(i), "filename": n, "size": len(d)} for i, (n, d) in files.items()]
        author = {"id": BOT_ID, "username": BOT_NAME, "bot": True}
        reply = {"id": message_id, "channel_id": chat_id, "author": author}
        return _json({**reply, "content": body.get("content") or "", "attachments": attachments})

    def _id(self) -> str:
        self.next_id += 1
        return str(self.next_id)


def _message_body(
    content_type: str, raw: bytes
) -> tuple[dict[str, Any], dict[int, tuple[str, bytes]]]:
    """A message's JSON, or a multipart one's `payload_json` and each `files[n]` part's file
    name and bytes."""
    fields = request_fields(content_type, raw)
    if not content_type.startswith("multipart/"):
        return fields, {}
    files: dict[int, tuple[str, bytes]] = {}
    for name, value in fields.items():
        found = re.fullmatch(r"files\[(\d+)\]", name)
        if found and isinstance(value, Upload):
            files[int(found[1])] = (value.filename, value.data)
    return json.loads(fields.get("payload_json") or "{}"), files


def _refused_files(
    body: dict[str, Any], files: dict[int, tuple[str, bytes]]
) -> web.Response | None:
    """Discord's answer to files or embeds it refuses; None when they are fine."""
    if any(len(data) > FILE_MAX for _, data in files.values()):
        return _error(413, 40005, "Request entity too large")
    named = {int(a.get("id", -1)) for a in body.get("attachments") or []}
    if files and not set(files) <= named:
        return _error(400, 50035, "Invalid Form Body: attachments: each file needs its entry")
    for index, embed in enumerate(body.get("embeds") or []):
        url = str((embed.get("image") or {}).get("url") or "")
        if url and not url.startswith(("http://", "https://", "attachment://")):
            scheme = url.partition(":")[0]
            where = f"embeds.{index}.image.url"
            refused = f"Invalid Form Body: {where}: Scheme {scheme!r} is not supported."
            return _error(400, 50035, refused)
    return None


def _json(body: dict[str, Any], status: int = 200, **how: Any) -> web.Response:
    """JSON as Discord sends it: `Content-Type: application/json` exactly (discord.py parses
    only that; aiohttp's default adds a charset)."""
    headers = {"Content-Type": "application/json", **how.pop("headers", {})}
    return web.Response(body=json.dumps(body).encode(), status=status, headers=headers)


def _error(status: int, code: int, message: str) -> web.Response:
    return _json({"code": code, "message": message}, status=status)
