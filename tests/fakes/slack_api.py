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
that never answer (`hang`) and lost acks (`hold_acks`)."""

from __future__ import annotations

import asyncio
import html
import itertools
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import WSMsgType, web

BOT_USER = "UCRAYFISH"
TEXT_MAX = 40000


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


class FakeSlack:
    def __init__(self, bot_token: str = "xoxb-test-bot", app_token: str = "xapp-test-app"):
        self.bot_token, self.app_token = bot_token, app_token
        self.lock = threading.Condition()
        self.shown: list[Shown] = []
        self.posted: dict[str, set[str]] = {}  # channel → ts of people's messages in it
        self.actions: list[tuple[str, str, float]] = []  # channel, status, monotonic time
        self.calls: list[tuple[str, int, str]] = []  # method, HTTP status, error
        self.floods: dict[str, list[int]] = {}
        self.hung: set[tuple[str, str | None]] = set()
        self.hold_acks = False
        self.unacked: dict[str, dict[str, Any]] = {}  # envelope id → envelope
        self.handed: dict[str, int] = {}  # message ts → times sent over a socket
        self.tickets: set[str] = set()
        self.sockets: list[tuple[web.WebSocketResponse, asyncio.Queue[dict[str, Any]]]] = []
        self._ts = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle --------------------------------------------------------------------------
    def __enter__(self) -> FakeSlack:
        started = threading.Event()
        threading.Thread(target=self._serve, args=(started,), daemon=True).start()
        assert started.wait(10), "fake Slack did not start"
        return self

    def _serve(self, started: threading.Event) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self._start())
        started.set()
        self._loop.run_forever()

    async def _start(self) -> None:
        self._stopped = asyncio.Event()
        app = web.Application()
        app.router.add_post("/api/{method}", self._web_api)
        app.router.add_get("/link", self._socket)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._runner is not None
        with self.lock:
            self.hold_acks = False
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)

    async def _stop(self) -> None:
        assert self._stopped is not None and self._runner is not None
        self._stopped.set()
        for socket, _ in list(self.sockets):
            await socket.close()
        await self._runner.cleanup()

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

    def drop_sockets(self) -> None:
        """Closes every Socket Mode connection from Slack's side (as a deploy of Slack does)."""
        assert self._loop is not None

        async def close_all() -> None:
            for socket, _ in list(self.sockets):
                await socket.close()

        asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(10)

    def bot_messages(self, channel: str, top_level: bool = False) -> list[Shown]:
        with self.lock:
            return [
                m for m in self.shown if m.channel == channel and not (top_level and m.thread_ts)
            ]

    def flood(self, method: str, *retry_after: int) -> None:
        with self.lock:
            self.floods.setdefault(method, []).extend(retry_after)

    def hang(self, method: str, channel: str | None = None) -> None:
        with self.lock:
            self.hung.add((method, channel))

    def texts(self, channel: str) -> list[str]:
        with self.lock:
            return [m.text for m in self.shown if m.channel == channel]

    def wait_for(self, check: Any, timeout: float = 30.0) -> Any:
        """Waits until check() (called under the lock) is truthy; returns it."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while not (result := check()):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"fake Slack: timed out; calls: {self.calls[-8:]}")
                self.lock.wait(min(left, 0.1))
            return result

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
        assert self._loop is not None
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

    # -- the Web API ------------------------------------------------------------------------
    async def _web_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(request.query)
        body = await request.read()
        if body and "json" in request.headers.get("content-type", ""):
            params.update(json.loads(body))
        elif body:
            params.update(parse_qsl(body.decode()))
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
        if (method, None) in self.hung or (method, channel) in self.hung:
            assert self._stopped is not None
            await self._stopped.wait()
            raise ApiError("fatal_error", 500)
        with self.lock:
            waits = self.floods.get(method)
            if waits:
                raise ApiError("ratelimited", 429, waits.pop(0))
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
        raw = _checked_text(params)
        thread = str(params.get("thread_ts") or "") or None
        ts = self._new_ts()
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
