"""A fake NapCat on loopback: OneBot v11's forward WebSocket (https://github.com/botuniverse/onebot-11,
communication/ws.md, api/public.md, event/message.md) with NapCat's habits.

A client connects with `Authorization: Bearer <token>` (or `?access_token=`); a wrong token gets
NapCat's `{"status": "failed", "retcode": 1403}` and the socket closed. It is sent a lifecycle
`connect` meta event, then each person's message as a `message` event (array format) to every
client connected at that moment: OneBot keeps no backlog and has no acknowledgement. Actions
`{"action", "params", "echo"}` are answered `{"status", "retcode", "data", "message", "echo"}`:
get_login_info, send_private_msg, send_group_msg, get_msg, set_input_status (NapCat's typing),
get_file (pictures and files: napcat_media.py). A send with an empty or over-long text, a
segment other than text or image, or to a chat nobody wrote from, fails 1400.
Tests inject failures (`flood`: NapCat's retcode 200 failure, as QQ's risk control gives) and
actions that are never answered (`hang`)."""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.exceptions import ConnectionClosed
from websockets.sync.server import Server, ServerConnection

from tests.fakes.napcat_media import Media, MediaRefused
from tests.fakes.platform_base import FakePlatform, start_ws, ws_url

SELF_ID = 3890001
TEXT_LIMIT = 3000


class ActionFailed(Exception):
    def __init__(self, retcode: int, message: str):
        super().__init__(message)
        self.retcode = retcode


@dataclass
class Shown:
    """A message the bot sent: `chat` is `<user_id>` or `g<group_id>` (the channel's ids)."""

    message_id: int
    chat: str
    text: str
    at: float = field(default_factory=time.monotonic)


class FakeNapCat(FakePlatform):
    """Floods are of "send" (its values are not used by OneBot); hung calls are
    (action, chat)."""

    label = "NapCat"

    def __init__(self, token: str = "napcat-test-token"):
        super().__init__()
        self.token = token
        self.clients: list[ServerConnection] = []
        self.messages: dict[int, dict[str, Any]] = {}  # message_id → the message as get_msg
        self.handed: dict[int, int] = {}  # message_id → clients it was pushed to
        self.known: set[str] = set()  # chats someone wrote from: the bot may write there
        self.shown: list[Shown] = []
        self.typing: list[tuple[str, float]] = []
        self.calls: list[tuple[str, dict[str, Any], str]] = []  # action, params, status
        self.refused_tokens = 0
        self.media = Media()
        self._ids = itertools.count(1)
        self._server: Server | None = None

    def __enter__(self) -> FakeNapCat:
        self._server = start_ws(self._serve)
        self.media.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        if self._server is not None:
            self._server.shutdown()
        self.media.stop()

    @property
    def url(self) -> str:
        return ws_url(self._server)

    # -- what tests do ----------------------------------------------------------------------
    def user_says(
        self,
        text: str,
        user_id: int,
        group_id: int | None = None,
        mention: bool = False,
        reply_to_bot: bool = False,
    ) -> int:
        """A person's message pushed to the connected clients; returns its message_id."""
        segments: list[dict[str, Any]] = []
        if reply_to_bot:
            with self.lock:
                mine = [m for m in self.messages.values() if m["sender"]["user_id"] == SELF_ID]
            replied = mine[-1]["message_id"] if mine else self._bot_message(group_id)
            segments.append({"type": "reply", "data": {"id": str(replied)}})
        if mention:
            segments.append({"type": "at", "data": {"qq": str(SELF_ID), "name": "Crayfish"}})
            text = f" {text}"
        segments.append({"type": "text", "data": {"text": text}})
        return self._push_message(segments, text, user_id, group_id)

    def user_sends_file(
        self, data: bytes, name: str, user_id: int, caption: str = "", image: bool = True
    ) -> int:
        """A person's picture or file in their private chat, with a caption; its message_id."""
        segments = [self.media.segment(data, name, image)]
        if caption:
            segments.append({"type": "text", "data": {"text": caption}})
        kind = "image" if image else "file"
        return self._push_message(segments, f"[CQ:{kind},file={name}]{caption}", user_id, None)

    def _push_message(
        self, segments: list[dict[str, Any]], text: str, user_id: int, group_id: int | None
    ) -> int:
        with self.lock:
            message_id = next(self._ids)
            sender = {"user_id": user_id, "nickname": f"user{user_id}", "card": ""}
            event: dict[str, Any] = {
                "time": int(time.time()),
                "self_id": SELF_ID,
                "post_type": "message",
                "message_type": "group" if group_id else "private",
                "sub_type": "normal" if group_id else "friend",
                "message_id": message_id,
                "user_id": user_id,
                "message": segments,
                "raw_message": text,
                "font": 14,
                "sender": sender,
            }
            if group_id:
                event["group_id"] = group_id
            self.known.add(f"g{group_id}" if group_id else str(user_id))
            self.messages[message_id] = event
            self.handed[message_id] = len(self.clients)
            clients = list(self.clients)
        for client in clients:
            _push(client, event)
        return message_id

    def _bot_message(self, group_id: int | None) -> int:
        """An earlier message of the bot's in the group, to reply to."""
        with self.lock:
            message_id = next(self._ids)
            sender = {"user_id": SELF_ID, "nickname": "Crayfish"}
            self.messages[message_id] = {"message_id": message_id, "sender": sender}
            return message_id

    def texts(self, chat: str) -> list[str]:
        with self.lock:
            return [m.text for m in self.shown if m.chat == chat]

    def first_sign(self, chat: str, after: float) -> float | None:
        with self.lock:
            times = [t for c, t in self.typing if c == chat and t >= after]
            times += [m.at for m in self.shown if m.chat == chat and m.at >= after]
        return min(times, default=None)

    # -- the WebSocket ----------------------------------------------------------------------
    def _serve(self, client: ServerConnection) -> None:
        assert client.request is not None
        header = client.request.headers.get("Authorization", "")
        query = parse_qs(urlsplit(client.request.path).query).get("access_token", [""])[0]
        if self.token not in (header.removeprefix("Bearer ").strip(), query):
            with self.lock:
                self.refused_tokens += 1
                self.lock.notify_all()
            client.send(json.dumps(_answer("failed", 1403, None, "token验证失败", None)))
            client.close()
            return
        lifecycle = {"time": int(time.time()), "self_id": SELF_ID, "post_type": "meta_event"}
        _push(client, {**lifecycle, "meta_event_type": "lifecycle", "sub_type": "connect"})
        with self.lock:
            self.clients.append(client)
        try:
            for frame in client:
                self._act(client, json.loads(frame))
        except ConnectionClosed:
            pass
        finally:
            with self.lock:
                self.clients.remove(client)

    def _act(self, client: ServerConnection, request: dict[str, Any]) -> None:
        action, params = str(request.get("action", "")), request.get("params") or {}
        chat = _chat_of(params)
        if self.is_hung(action, chat):
            with self.lock:
                self.calls.append((action, params, "hung"))
            return  # never answered
        try:
            data = self._action(action, params)
            answer = _answer("ok", 0, data, "", request.get("echo"))
        except (ActionFailed, MediaRefused) as exc:
            answer = _answer("failed", exc.retcode, None, str(exc), request.get("echo"))
        with self.lock:
            self.calls.append((action, params, answer["status"]))
            self.lock.notify_all()
        _push(client, answer)

    def _action(self, action: str, params: dict[str, Any]) -> Any:
        if action == "get_login_info":
            return {"user_id": SELF_ID, "nickname": "Crayfish"}
        if action in ("send_private_msg", "send_group_msg"):
            return self._send(action, params)
        if action == "get_msg":
            with self.lock:
                found = self.messages.get(int(params.get("message_id", 0)))
            if found is None:
                raise ActionFailed(1400, "消息不存在")
            return found
        if action == "set_input_status":
            chat = str(params.get("user_id"))
            with self.lock:
                self.typing.append((chat, time.monotonic()))
                self.lock.notify_all()
            return None
        if action == "get_file":
            return self.media.get_file(params)
        raise ActionFailed(1404, f"不支持的Api {action}")

    def _send(self, action: str, params: dict[str, Any]) -> dict[str, int]:
        chat = _chat_of(params)
        message = params.get("message")
        if not isinstance(message, list) or not message:
            raise ActionFailed(1400, "消息为空")
        if any(s.get("type") not in ("text", "image") for s in message):
            raise ActionFailed(1400, "this fake takes text and image segments only")
        text = "".join(str(s.get("data", {}).get("text", "")) for s in message)
        images = [s for s in message if s.get("type") == "image"]
        with self.lock:
            if chat not in self.known:
                raise ActionFailed(1400, "找不到目标")
            if (not text.strip() and not images) or len(text) > TEXT_LIMIT:
                raise ActionFailed(1400, f"消息为空或过长 ({len(text)})")
            if self.next_flood("send") is not None:
                raise ActionFailed(200, "发送消息失败: 风控")
            message_id = next(self._ids)
            for image in images:
                self.media.shown(str(chat), image)
            if text:
                self.shown.append(Shown(message_id, chat, text))
            sender = {"user_id": SELF_ID, "nickname": "Crayfish"}
            self.messages[message_id] = {"message_id": message_id, "sender": sender}
            self.lock.notify_all()
            return {"message_id": message_id}


def _chat_of(params: dict[str, Any]) -> str | None:
    if "group_id" in params:
        return f"g{params['group_id']}"
    if "user_id" in params:
        return str(params["user_id"])
    return None


def _answer(status: str, retcode: int, data: Any, message: str, echo: Any) -> dict[str, Any]:
    answer = {"status": status, "retcode": retcode, "data": data, "message": message}
    answer["wording"] = message
    if echo is not None:
        answer["echo"] = echo
    return answer


def _push(client: ServerConnection, frame: dict[str, Any]) -> None:
    try:
        client.send(json.dumps(frame, ensure_ascii=False))
    except ConnectionClosed:
        pass
