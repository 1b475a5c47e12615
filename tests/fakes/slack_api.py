"""A fake Slack on loopback, speaking its documented wire format: the Web API
(`POST /api/<method>`, form or JSON parameters, `Authorization: Bearer <token>`, answers
`{"ok": true, …}` or `{"ok": false, "error": …}`, a 429 with `Retry-After` when rate limited)
and Socket Mode (apps.connections.open with the app-level token gives a single-use WebSocket
URL; the socket says `hello`, carries `events_api` envelopes, and takes `{"envelope_id"}` acks).

It rejects what Slack rejects: an unknown token (invalid_auth), a bot token where the app-level
one belongs (not_allowed_token_type), an empty text (no_text), a text over 40,000 characters
(msg_too_long), an unknown channel (channel_not_found), an update of a message the bot did not
send (cant_update_message). An envelope stays unacknowledged until acked and is delivered again
to the next connection, as Slack retries. Tests inject people's messages, 429s (`flood`), calls
that never answer (`hang`) and lost acks (`hold_acks`).

Files: a person's shared file is a `file_share` message whose `files` give `url_private` and
`url_private_download` on the fake's files host (`/files-pri/…`), which serves the bytes only
with the bot token (without it: 200 and an HTML sign-in page, as Slack answers); a second host,
`elsewhere`, records who calls it. Uploads follow Slack's flow: files.getUploadURLExternal
(`filename`, `length` > 0) gives a single-use upload URL; its POST takes the bytes (raw or
multipart) and answers `OK - <n>`; files.completeUploadExternal (`files` as JSON, `channel_id`,
`thread_ts`) shares them, refusing ids never uploaded or uploaded with another length. An image
block (`{"type": "image", "image_url", "alt_text"}`) needs an http(s) URL and an alt text."""

from __future__ import annotations

import asyncio
import html
import itertools
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import BodyPartReader, WSMsgType, web

from tests.fakes.platform_base import AioServer, FakePlatform, request_fields

BOT_USER = "UCRAYFISH"
TEXT_MAX = 40000
SIGN_IN_PAGE = "<!DOCTYPE html><html><body>Sign in to Fake Slack</body></html>"


class ApiError(Exception):
    def __init__(self, error: str, status: int = 200, retry_after: int | None = None):
        super().__init__(error)
        self.error, self.status, self.retry_after = error, status, retry_after


@dataclass
class Shown:
    """A message the bot shows: its text as rendered now, the mrkdwn sent, every version."""

    channel: str
    ts: str
    thread_ts: str | None
    text: str
    raw: str
    versions: list[str] = field(default_factory=list)
    at: float = 0.0


class FakeSlack(FakePlatform):
    label = "Slack"

    def __init__(self, bot_token: str = "xoxb-test-bot", app_token: str = "xapp-test-app"):
        super().__init__()
        self.bot_token, self.app_token = bot_token, app_token
        self.shown: list[Shown] = []
        self.posted: dict[str, set[str]] = {}  # channel → ts of people's messages in it
        self.actions: list[tuple[str, str, float]] = []  # channel, status, monotonic time
        self.calls: list[tuple[str, int, str]] = []  # method, HTTP status, error
        self.unacked: dict[str, dict[str, Any]] = {}  # envelope id → envelope
        self.handed: dict[str, int] = {}  # message ts → times sent over a socket
        self.tickets: set[str] = set()
        self.files: dict[str, tuple[bytes, str]] = {}  # file id → bytes, mimetype
        self.file_requests: list[tuple[str, str, str]] = []  # host (slack/elsewhere), path, auth
        self.redirect_files = False  # the files host redirects downloads to `elsewhere`
        self.uploads: dict[str, dict[str, Any]] = {}  # file id → filename, length, data
        self.pictures: list[tuple[str, bytes | str]] = []  # channel, bytes shared or image URL
        self.elsewhere_port = 0
        self.sockets: list[tuple[web.WebSocketResponse, asyncio.Queue[dict[str, Any]]]] = []
        self._ts = itertools.count(1)
        self._server = AioServer()
        self._loop = self._server.loop
        self.port = 0

    # -- lifecycle --------------------------------------------------------------------------
    def __enter__(self) -> FakeSlack:
        app = web.Application()
        app.router.add_post("/api/{method}", self._web_api)
        app.router.add_get("/link", self._socket)
        app.router.add_get("/files-pri/{file}/{rest:.*}", self._file)
        app.router.add_post("/upload/v1/{file}", self._upload)
        # 127.0.0.2: another host, as a file address that is not Slack's would name.
        self.port, self.elsewhere_port = self._server.start(app, "127.0.0.1", "127.0.0.2")
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._server.stop(self._close_sockets)

    async def _close_sockets(self) -> None:
        for socket, _ in list(self.sockets):
            await socket.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    # -- what tests do ----------------------------------------------------------------------
    def user_says(
        self,
        text: str,
        user: str,
        channel: str,
        channel_type: str = "im",
        thread_ts: str | None = None,
        parent_user_id: str | None = None,
        files: list[dict[str, Any]] | None = None,
    ) -> str:
        """A person's message as a `message` event in an envelope; returns its ts."""
        with self.lock:
            ts = self._new_ts()
            self.posted.setdefault(channel, set()).add(ts)
            event: dict[str, Any] = {
                "type": "message",
                "channel": channel,
                "channel_type": channel_type,
                "user": user,
                "text": text,
                "ts": ts,
                "event_ts": ts,
            }
            if thread_ts:
                event.update(thread_ts=thread_ts, parent_user_id=parent_user_id)
            if files:
                event.update(subtype="file_share", files=files, upload=True)
            envelope = {
                "envelope_id": str(uuid.uuid4()),
                "type": "events_api",
                "accepts_response_payload": False,
                "retry_attempt": 0,
                "retry_reason": "",
                "payload": {
                    "type": "event_callback",
                    "team_id": "T0001",
                    "api_app_id": "A0001",
                    "event_id": f"Ev{ts.replace('.', '')}",
                    "event_time": int(time.time()),
                    "event": event,
                },
            }
            self.unacked[envelope["envelope_id"]] = envelope
            if self.sockets:
                self._hand(self.sockets[-1][1], envelope)
            return ts

    def user_shares_file(
        self,
        data: bytes,
        name: str,
        user: str,
        channel: str,
        mimetype: str = "application/octet-stream",
        text: str = "",
        stated_size: int | None = None,
        host: str = "slack",
    ) -> str:
        """A person shares a file (a `file_share` message, `text` its comment); its ts. The
        file's address is on the files host, or on `elsewhere` when `host` says so."""
        with self.lock:
            file_id = f"F{len(self.files) + 1:08d}"
            self.files[file_id] = (data, mimetype)
        port = self.elsewhere_port if host == "elsewhere" else self.port
        ip = "127.0.0.2" if host == "elsewhere" else "127.0.0.1"
        base = f"http://{ip}:{port}/files-pri/T0001-{file_id}"
        file = {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": name.rsplit(".", 1)[-1],
            "size": len(data) if stated_size is None else stated_size,
            "mode": "hosted",
            "is_external": False,
            "url_private": f"{base}/{name}",
            "url_private_download": f"{base}/download/{name}",
        }
        return self.user_says(text, user, channel, files=[file])

    def drop_sockets(self) -> None:
        """Closes every Socket Mode connection from Slack's side (as a deploy of Slack does)."""
        self._server.run(self._close_sockets())

    def bot_messages(self, channel: str, top_level: bool = False) -> list[Shown]:
        with self.lock:
            return [
                m for m in self.shown if m.channel == channel and not (top_level and m.thread_ts)
            ]

    def texts(self, channel: str) -> list[str]:
        with self.lock:
            return [m.text for m in self.shown if m.channel == channel]

    def first_sign(self, channel: str, after: float) -> float | None:
        with self.lock:
            times = [t for c, _, t in self.actions if c == channel and t >= after]
            times += [m.at for m in self.shown if m.channel == channel and m.at >= after]
            return min(times, default=None)

    # -- Socket Mode ------------------------------------------------------------------------
    def _hand(self, queue: asyncio.Queue[dict[str, Any]], envelope: dict[str, Any]) -> None:
        """Queues the envelope on a socket (under the lock, from any thread)."""
        ts = envelope["payload"]["event"]["ts"]
        self.handed[ts] = self.handed.get(ts, 0) + 1
        self._loop.call_soon_threadsafe(queue.put_nowait, envelope)

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        with self.lock:
            ticket = request.query.get("ticket", "")
            if ticket not in self.tickets:
                raise web.HTTPUnauthorized()
            self.tickets.discard(ticket)  # a URL opens one connection
        socket = web.WebSocketResponse(autoping=True)
        await socket.prepare(request)
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        await socket.send_json({"type": "hello", "num_connections": 1})
        with self.lock:
            self.sockets.append((socket, queue))
            for envelope in self.unacked.values():  # what was not acknowledged, again
                envelope["retry_attempt"] += 1
                envelope["retry_reason"] = "timeout"
                self._hand(queue, envelope)
        sender = asyncio.create_task(self._send_envelopes(socket, queue))
        try:
            async for message in socket:
                if message.type == WSMsgType.TEXT:
                    self._acked(json.loads(message.data))
        finally:
            sender.cancel()
            with self.lock:
                self.sockets = [s for s in self.sockets if s[0] is not socket]
        return socket

    async def _send_envelopes(
        self, socket: web.WebSocketResponse, queue: asyncio.Queue[dict[str, Any]]
    ) -> None:
        while True:
            envelope = await queue.get()
            await socket.send_json(envelope)

    def _acked(self, answer: dict[str, Any]) -> None:
        with self.lock:
            if self.hold_acks:  # the acknowledgement is lost on the way
                return
            self.unacked.pop(str(answer.get("envelope_id")), None)
            self.lock.notify_all()

    # -- files ------------------------------------------------------------------------------
    async def _file(self, request: web.Request) -> web.StreamResponse:
        """A shared file's bytes, for the bot's token only (anyone else: Slack's sign-in page)."""
        here = "elsewhere" if request.url.port == self.elsewhere_port else "slack"
        auth = request.headers.get("Authorization", "")
        with self.lock:
            self.file_requests.append((here, request.path, auth))
            self.lock.notify_all()
            if here == "slack" and self.redirect_files:
                elsewhere = f"http://127.0.0.2:{self.elsewhere_port}{request.path_qs}"
                raise web.HTTPFound(elsewhere)
            file_id = request.match_info["file"].rpartition("-")[2]
            found = self.files.get(file_id)
        if here == "elsewhere" or found is None:
            raise web.HTTPNotFound()
        if auth != f"Bearer {self.bot_token}":
            return web.Response(text=SIGN_IN_PAGE, content_type="text/html")
        data, mimetype = found
        return web.Response(body=data, content_type=mimetype)

    async def _upload(self, request: web.Request) -> web.Response:
        """The upload URL files.getUploadURLExternal gave: raw bytes or a multipart form."""
        file_id = request.match_info["file"]
        if request.content_type.startswith("multipart/"):
            reader = await request.multipart()
            part = await reader.next()
            data = await part.read() if isinstance(part, BodyPartReader) else b""
        else:
            data = await request.read()
        with self.lock:
            upload = self.uploads.get(file_id)
            if upload is None or "data" in upload:  # an upload URL is used once
                raise web.HTTPNotFound()
            upload["data"] = data
        return web.Response(text=f"OK - {len(data)}")

    # -- the Web API ------------------------------------------------------------------------
    async def _web_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(request.query)
        params.update(request_fields(request.headers.get("content-type", ""), await request.read()))
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        token = token or str(params.get("token", ""))
        status, answer, headers = 200, {"ok": True}, {}
        try:
            answer.update(await self._call(method, token, params))
        except ApiError as exc:
            status, answer = exc.status, {"ok": False, "error": exc.error}
            if exc.retry_after is not None:
                headers["Retry-After"] = str(exc.retry_after)
        with self.lock:
            self.calls.append((method, status, str(answer.get("error", ""))))
        return web.json_response(answer, status=status, headers=headers)

    async def _call(self, method: str, token: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "apps.connections.open":
            if token != self.app_token:
                raise ApiError("not_allowed_token_type" if token else "not_authed")
            return self._open_connection()
        if token != self.bot_token:
            raise ApiError("invalid_auth" if token else "not_authed")
        handler = getattr(self, "_api_" + method.replace(".", "_"), None)
        if handler is None:
            raise ApiError("unknown_method", 404)
        channel = str(params.get("channel") or params.get("channel_id") or "") or None
        if self.is_hung(method, channel):
            await asyncio.to_thread(self.released.wait)
            raise ApiError("fatal_error", 500)
        with self.lock:
            retry_after = self.next_flood(method)
            if retry_after is not None:
                raise ApiError("ratelimited", 429, int(retry_after))
            result: dict[str, Any] = handler(params)
            self.lock.notify_all()
            return result

    def _open_connection(self) -> dict[str, Any]:
        with self.lock:
            ticket = uuid.uuid4().hex
            self.tickets.add(ticket)
        return {"url": f"ws://127.0.0.1:{self.port}/link?ticket={ticket}"}

    def _api_auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://fake.slack.com/",
            "team": "Fake",
            "user": "crayfish",
            "team_id": "T0001",
            "user_id": BOT_USER,
            "bot_id": "B0001",
        }

    def _api_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._known_channel(params.get("channel"))
        thread = str(params.get("thread_ts") or "") or None
        ts = self._new_ts()
        if params.get("blocks"):
            images = _image_urls(params["blocks"])
            self.pictures.extend((channel, url) for url in images)
            return {"channel": channel, "ts": ts, "message": {"ts": ts, "bot_id": "B0001"}}
        raw = _checked_text(params)
        rendered = rendered_text(raw)
        self.shown.append(Shown(channel, ts, thread, rendered, raw, [rendered], time.monotonic()))
        message = {"type": "message", "user": BOT_USER, "bot_id": "B0001", "text": raw, "ts": ts}
        return {"channel": channel, "ts": ts, "message": message}

    def _api_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._known_channel(params.get("channel"))
        raw = _checked_text(params)
        found = [m for m in self.shown if m.channel == channel and m.ts == params.get("ts")]
        if not found:
            raise ApiError("cant_update_message")
        shown = found[0]
        shown.raw, shown.text = raw, rendered_text(raw)
        shown.versions.append(shown.text)
        return {"channel": channel, "ts": shown.ts, "text": raw}

    def _api_files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        length = int(params.get("length") or 0)
        if not params.get("filename") or length <= 0:
            raise ApiError("missing_argument" if length <= 0 else "invalid_arguments")
        file_id = f"F{len(self.files) + len(self.uploads) + 1:08d}U"
        self.uploads[file_id] = {"filename": str(params["filename"]), "length": length}
        upload_url = f"http://127.0.0.1:{self.port}/upload/v1/{file_id}"
        return {"upload_url": upload_url, "file_id": file_id}

    def _api_files_completeUploadExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        files = params.get("files")
        listed = json.loads(files) if isinstance(files, str) else files
        if not isinstance(listed, list) or not listed:
            raise ApiError("invalid_arguments")
        channel = self._known_channel(params.get("channel_id"))
        thread = str(params.get("thread_ts") or "")
        if thread and thread not in self.posted.get(channel, set()) | self._bot_ts(channel):
            raise ApiError("invalid_thread_ts")
        done = []
        for entry in listed:
            upload = self.uploads.get(str(entry.get("id")))
            if upload is None or len(upload.get("data", b"")) != upload["length"]:
                raise ApiError("file_not_found")  # never uploaded, or not the length announced
            done.append((entry, upload))
        shared = []
        for entry, upload in done:
            self.pictures.append((channel, upload["data"]))
            shared.append({"id": entry["id"], "title": entry.get("title") or upload["filename"]})
        return {"files": shared}

    def _bot_ts(self, channel: str) -> set[str]:
        return {m.ts for m in self.shown if m.channel == channel}

    def _api_assistant_threads_setStatus(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._known_channel(params.get("channel_id"))
        if params.get("thread_ts") not in self.posted.get(channel, set()):
            raise ApiError("invalid_thread_ts")
        self.actions.append((channel, str(params.get("status", "")), time.monotonic()))
        return {}

    def _known_channel(self, channel: Any) -> str:
        if not channel or str(channel) not in self.posted:
            raise ApiError("channel_not_found")
        return str(channel)

    def _new_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"


def _checked_text(params: dict[str, Any]) -> str:
    raw = str(params.get("text") or "")
    if not raw.strip():
        raise ApiError("no_text")
    if len(raw) > TEXT_MAX:
        raise ApiError("msg_too_long")
    return raw


def _image_urls(blocks: Any) -> list[str]:
    """The image blocks' URLs; invalid_blocks for a block Slack would refuse."""
    listed = json.loads(blocks) if isinstance(blocks, str) else blocks
    urls = []
    for block in listed if isinstance(listed, list) else [None]:
        if not isinstance(block, dict) or block.get("type") != "image":
            raise ApiError("invalid_blocks")
        url, alt = str(block.get("image_url") or ""), str(block.get("alt_text") or "")
        if not url.startswith(("http://", "https://")) or len(url) > 3000:
            raise ApiError("invalid_blocks")
        if not alt or len(alt) > 2000:
            raise ApiError("invalid_blocks")
        urls.append(url)
    return urls


def rendered_text(mrkdwn: str) -> str:
    """What a person reads of the mrkdwn: markers gone, `<url|label>` its label, entities
    decoded."""
    text = re.sub(r"```\n?(.*?)\n?```", r"\1", mrkdwn, flags=re.S)
    text = re.sub(r"`([^`\n]+)`", r"\1", text)
    text = re.sub(r"<([^<>|]+)\|([^<>]+)>", r"\2", text)
    text = re.sub(r"<([^<>]+)>", r"\1", text)
    text = re.sub(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])", r"\1", text)
    text = re.sub(r"(?<!\w)_([^_\n]+)_(?!\w)", r"\1", text)
    text = re.sub(r"(?<![\w~])~([^~\n]+)~(?![\w~])", r"\1", text)
    return html.unescape(text)
