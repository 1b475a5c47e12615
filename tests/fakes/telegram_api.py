"""A fake Telegram Bot API on loopback, speaking its wire format (https://core.telegram.org/bots/api):
`/bot<token>/<method>` with urlencoded, JSON or multipart/form-data parameters (nested ones
arrive as JSON strings in forms; an uploaded file is a multipart part with a file name),
`{"ok": true, "result": …}` or `{"ok": false, "error_code", "description"}`.

It rejects what Telegram rejects: an unknown token (401), an unknown method (404), an empty or
over-long text (4096 UTF-16 units after entity parsing), HTML it cannot parse, an edit of a
message that is not the bot's or does not change it, a chat the bot never saw, a photo that is
neither an http(s) URL nor an uploaded image (or is over 10 MB). Updates stay
pending until a getUpdates `offset` acknowledges them. Tests inject users' messages, 429s
(`flood`) and calls that never answer (`hang`)."""

from __future__ import annotations

import html
import json
import re
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from tests.fakes.platform_base import (
    FakePlatform,
    QuietHandler,
    Upload,
    http_url,
    request_fields,
    start_http,
    stop_http,
)

BOT_ID = 7000001
BOT_USERNAME = "crayfish_test_bot"
TEXT_LIMIT = 4096
PHOTO_LIMIT = 10 * 1024 * 1024  # sendPhoto: "The photo must be at most 10 MB in size"
IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"RIFF")
HTML_TAGS = {
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "a",
    "code",
    "pre",
    "blockquote",
    "span",
    "tg-spoiler",
    "tg-emoji",
}


class ApiError(Exception):
    def __init__(self, code: int, description: str, parameters: dict[str, Any] | None = None):
        super().__init__(description)
        self.code, self.description, self.parameters = code, description, parameters


@dataclass
class Shown:
    """A message the bot shows in a chat: its current text and every version it had."""

    message_id: int
    chat_id: int
    text: str
    html: str
    versions: list[str] = field(default_factory=list)
    at: float = 0.0


class FakeTelegram(FakePlatform):
    label = "Telegram"

    def __init__(self, token: str = "123456:TEST-token"):
        super().__init__()
        self.token = token
        self.updates: list[dict[str, Any]] = []  # not yet acknowledged
        self.handed: dict[int, int] = {}  # update_id → times getUpdates returned it
        self.next_update = 1000
        self.next_message = 1
        self.chats: dict[int, dict[str, Any]] = {}
        self.shown: list[Shown] = []
        self.actions: list[tuple[int, str, float]] = []  # chat, action, monotonic time
        self.calls: list[tuple[str, dict[str, Any], int]] = []  # method, params, HTTP status
        # hold_acks: getUpdates carrying a new offset never answers
        # chat, the photo the bot sent: a URL, or the bytes it uploaded
        self.photos: list[tuple[int, str | bytes]] = []
        self.files: dict[str, bytes] = {}  # file_id → the file users sent (getFile, /file/)
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle --------------------------------------------------------------------------
    def __enter__(self) -> FakeTelegram:
        self._server = start_http(_Handler, fake=self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        stop_http(self._server)

    @property
    def url(self) -> str:
        return http_url(self._server)

    # -- what tests do ----------------------------------------------------------------------
    def user_says(
        self,
        text: str,
        user_id: int = 501,
        chat_id: int | None = None,
        group: bool = False,
        username: str = "alice",
        reply_to_bot: bool = False,
    ) -> int:
        """A person's message, as an update; returns its message_id."""
        chat_id = chat_id if chat_id is not None else user_id
        chat = {"id": chat_id, "type": "supergroup" if group else "private"}
        chat.update({"title": "a group"} if group else {"first_name": username})
        user = {"id": user_id, "is_bot": False, "first_name": username, "username": username}
        with self.lock:
            self.chats[chat_id] = chat
            message: dict[str, Any] = {
                "message_id": self._message_id(),
                "date": int(time.time()),
                "chat": chat,
                "from": user,
                "text": text,
            }
            mentions = [m.start() for m in re.finditer(f"@{BOT_USERNAME}", text)]
            if mentions:
                length = len(BOT_USERNAME) + 1
                message["entities"] = [
                    {"type": "mention", "offset": at, "length": length} for at in mentions
                ]
            if reply_to_bot:
                bot = {"id": BOT_ID, "is_bot": True, "first_name": "Crayfish"}
                message["reply_to_message"] = {
                    "message_id": 1,
                    "date": 0,
                    "chat": chat,
                    "from": bot,
                    "text": "earlier",
                }
            self.updates.append({"update_id": self.next_update, "message": message})
            self.next_update += 1
            self.lock.notify_all()
            return int(message["message_id"])

    def user_sends_file(
        self, data: bytes, user_id: int, caption: str = "", photo: bool = True, name: str = ""
    ) -> int:
        """A person's photo (or document `name`) in their private chat; its message_id."""
        file_id = f"file{len(self.files) + 1}"
        with self.lock:
            self.files[file_id] = data
        message_id = self.user_says(caption, user_id=user_id, username=f"user{user_id}")
        with self.lock:
            message = self.updates[-1]["message"]
            del message["text"]
            if caption:
                message["caption"] = caption
            meta = {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": len(data)}
            if photo:
                message["photo"] = [{**meta, "width": 64, "height": 64}]
            else:
                message["document"] = {**meta, "file_name": name, "mime_type": "text/plain"}
        return message_id

    def texts(self, chat_id: int) -> list[str]:
        with self.lock:
            return [m.text for m in self.shown if m.chat_id == chat_id]

    def first_sign(self, chat_id: int, after: float) -> float | None:
        """Monotonic time of the first typing or message in the chat after `after`."""
        times = [t for c, _, t in self.actions if c == chat_id and t >= after]
        times += [m.at for m in self.shown if m.chat_id == chat_id and m.at >= after]
        return min(times, default=None)

    # -- the Bot API ------------------------------------------------------------------------
    def call(self, token: str, method: str, params: dict[str, Any]) -> Any:
        if token != self.token:
            raise ApiError(401, "Unauthorized")
        handler = getattr(self, f"_api_{method.lower()}", None)
        if handler is None:
            raise ApiError(404, "Not Found")
        chat = _int_or_none(params.get("chat_id"))
        if self.is_hung(method, chat):
            self.released.wait()
            raise ApiError(502, "Bad Gateway")
        after = self.next_flood(method)
        if after is not None:
            raise ApiError(429, f"Too Many Requests: retry after {after}", {"retry_after": after})
        return handler(params)

    def _api_getme(self, params: dict[str, Any]) -> Any:
        return {
            "id": BOT_ID,
            "is_bot": True,
            "first_name": "Crayfish",
            "username": BOT_USERNAME,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    def _api_deletewebhook(self, params: dict[str, Any]) -> Any:
        return True

    def _api_getupdates(self, params: dict[str, Any]) -> Any:
        offset = _int_or_none(params.get("offset"))
        timeout = float(params.get("timeout") or 0)
        with self.lock:
            if offset is not None and any(u["update_id"] < offset for u in self.updates):
                if self.hold_acks:  # the acknowledgement never arrives: lost on the way
                    while self.hold_acks:
                        self.lock.wait(0.5)
                    raise ApiError(504, "Gateway Timeout")
                self.updates = [u for u in self.updates if u["update_id"] >= offset]
            deadline = time.monotonic() + timeout
            while not self.updates and time.monotonic() < deadline:
                self.lock.wait(deadline - time.monotonic())
            batch = self.updates[: int(params.get("limit") or 100)]
            for update in batch:
                self.handed[update["update_id"]] = self.handed.get(update["update_id"], 0) + 1
            return batch

    def _api_getfile(self, params: dict[str, Any]) -> Any:
        file_id = str(params.get("file_id"))
        if file_id not in self.files:
            raise ApiError(400, "Bad Request: invalid file_id")
        size = len(self.files[file_id])
        return {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_size": size,
            "file_path": f"documents/{file_id}",
        }

    def _api_sendphoto(self, params: dict[str, Any]) -> Any:
        chat_id = self._known_chat(params)
        photo = _photo(params.get("photo"))
        with self.lock:
            self.photos.append((chat_id, photo))
            self.lock.notify_all()
            shown = Shown(self._message_id(), chat_id, "", "", [], time.monotonic())
            return {**self._message_json(shown), "photo": [], "text": None}

    def _api_sendchataction(self, params: dict[str, Any]) -> Any:
        chat_id = self._known_chat(params)
        with self.lock:
            self.actions.append((chat_id, str(params.get("action")), time.monotonic()))
            self.lock.notify_all()
        return True

    def _api_sendmessage(self, params: dict[str, Any]) -> Any:
        chat_id = self._known_chat(params)
        raw = str(params.get("text", ""))
        text = _parsed(raw, params.get("parse_mode"))
        with self.lock:
            shown = Shown(self._message_id(), chat_id, text, raw, [text], time.monotonic())
            self.shown.append(shown)
            self.lock.notify_all()
            return self._message_json(shown)

    def _api_editmessagetext(self, params: dict[str, Any]) -> Any:
        chat_id = self._known_chat(params)
        message_id = _int_or_none(params.get("message_id"))
        raw = str(params.get("text", ""))
        text = _parsed(raw, params.get("parse_mode"))
        with self.lock:
            found = [m for m in self.shown if m.chat_id == chat_id and m.message_id == message_id]
            if not found:
                raise ApiError(400, "Bad Request: message to edit not found")
            shown = found[0]
            if shown.html == raw:
                raise ApiError(
                    400,
                    "Bad Request: message is not modified: specified new "
                    "message content and reply markup are exactly the same",
                )
            shown.text, shown.html = text, raw
            shown.versions.append(text)
            self.lock.notify_all()
            return self._message_json(shown)

    def _known_chat(self, params: dict[str, Any]) -> int:
        chat_id = _int_or_none(params.get("chat_id"))
        if chat_id is None or chat_id not in self.chats:
            raise ApiError(400, "Bad Request: chat not found")
        return chat_id

    def _message_id(self) -> int:
        self.next_message += 1
        return self.next_message

    def _message_json(self, shown: Shown) -> dict[str, Any]:
        bot = {"id": BOT_ID, "is_bot": True, "first_name": "Crayfish", "username": BOT_USERNAME}
        return {
            "message_id": shown.message_id,
            "date": int(time.time()),
            "from": bot,
            "chat": self.chats[shown.chat_id],
            "text": shown.text,
        }


def _photo(given: Any) -> str | bytes:
    """What sendPhoto shows: an http(s) URL, or the bytes of an uploaded image."""
    if isinstance(given, Upload):
        if not given.data:
            raise ApiError(400, "Bad Request: file must be non-empty")
        if len(given.data) > PHOTO_LIMIT:
            raise ApiError(400, "Bad Request: file is too big")
        if not given.data.startswith(IMAGE_MAGIC):
            raise ApiError(400, "Bad Request: IMAGE_PROCESS_FAILED")
        return given.data
    photo = str(given or "")
    if not photo.startswith(("http://", "https://")):
        raise ApiError(400, "Bad Request: wrong remote file identifier specified")
    return photo


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _parsed(raw: str, parse_mode: Any) -> str:
    """The text as Telegram shows it, or the error Telegram gives."""
    text = raw
    if parse_mode == "HTML":
        checker = _TagChecker()
        try:
            checker.feed(raw)
            checker.close()
        except ValueError as exc:
            raise ApiError(400, f"Bad Request: can't parse entities: {exc}") from None
        if checker.open:
            raise ApiError(400, f"Bad Request: can't parse entities: unclosed <{checker.open[-1]}>")
        text = html.unescape("".join(checker.text))
    elif parse_mode not in (None, ""):
        raise ApiError(400, f"Bad Request: unsupported parse_mode {parse_mode!r}")
    if not text.strip():
        raise ApiError(400, "Bad Request: message text is empty")
    if len(text.encode("utf-16-le")) // 2 > TEXT_LIMIT:
        raise ApiError(400, "Bad Request: message is too long")
    return text


class _TagChecker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.open: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in HTML_TAGS:
            raise ValueError(f'unsupported start tag "{tag}"')
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1] != tag:
            raise ValueError(f'unmatched end tag "{tag}"')
        self.open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def handle_entityref(self, name: str) -> None:
        if name not in ("lt", "gt", "amp", "quot"):
            raise ValueError(f"unsupported entity &{name};")
        self.text.append(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self.text.append(f"&#{name};")


class _Handler(QuietHandler):
    fake: FakeTelegram

    def do_GET(self) -> None:
        match = re.fullmatch(r"/file/bot([^/]+)/documents/(\w+)", urlsplit(self.path).path)
        if match is None:
            self.do_POST()
            return
        token = unquote(match[1])  # PTB quotes the path: the token's ':' arrives as %3A
        data = self.fake.files.get(match[2]) if token == self.fake.token else None
        self.reply(200 if data is not None else 404, data or b"", "application/octet-stream")

    def do_POST(self) -> None:
        parts = urlsplit(self.path)
        match = re.fullmatch(r"/bot([^/]+)/(\w+)", parts.path)
        params = dict(parse_qsl(parts.query))
        status, answer = 200, {}
        try:
            try:
                params.update(request_fields(self.headers.get("content-type", ""), self.body()))
            except ValueError as exc:
                raise ApiError(400, f"Bad Request: {exc}") from None
            if match is None:
                raise ApiError(404, "Not Found")
            answer = {"ok": True, "result": self.fake.call(match[1], match[2], params)}
        except ApiError as exc:
            status = exc.code
            answer = {"ok": False, "error_code": exc.code, "description": exc.description}
            if exc.parameters:
                answer["parameters"] = exc.parameters
        method = match[2] if match else parts.path
        with self.fake.lock:
            self.fake.calls.append((method, params, status))
        self.reply(status, json.dumps(answer).encode())
