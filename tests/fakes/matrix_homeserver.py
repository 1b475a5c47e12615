"""A fake Matrix homeserver on loopback, speaking the client-server API
(https://spec.matrix.org/v1.11/client-server-api/) as far as the channel uses it: whoami,
/sync with `since` and `timeout` (invites, newly joined rooms' timelines, new events),
joining, joined members, one event, sending (`PUT /rooms/{id}/send/{type}/{txn}`, the
transaction id making a resend the same event), `m.replace` edits, typing, account data, and
media: upload (`POST /_matrix/media/v3/upload`) and download through the authenticated media
API (`/_matrix/client/v1/media/download/…`, Matrix 1.11) or, with `authenticated_media` off
(an older server), only the legacy `/_matrix/media/v3/download/…`.

Errors are the spec's `{"errcode", "error"}` with its HTTP statuses: an unknown token (401
M_UNKNOWN_TOKEN), a room the bot is not in (403), an unknown event (404), an event over
65536 bytes (413 M_TOO_LARGE), an edit of another sender's event (400). Tests make people
talk, answer 429s with `retry_after_ms` (`flood`), hang calls, and hold acknowledgements (a
write of the sync position past a message handed to the bot never answers)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from tests.fakes.matrix_keys import Keys
from tests.fakes.platform_base import FakePlatform, QuietHandler, http_url, start_http, stop_http

SERVER = "fake.local"
BOT = f"@crayfish:{SERVER}"
BOT_DEVICE = "FAKEDEVICE"
ENCRYPTION = "m.room.encryption"
MEGOLM = "m.megolm.v1.aes-sha2"
EVENT_LIMIT = 65536
MEDIA_LIMIT = 50 * 1024 * 1024  # Synapse's default max_upload_size
PREFIX = "/_matrix/client/v3"


class MatrixError(Exception):
    def __init__(self, status: int, errcode: str, error: str, **extra: Any):
        super().__init__(error)
        self.status, self.errcode, self.error, self.extra = status, errcode, error, extra


@dataclass
class Room:
    room_id: str
    members: set[str]
    direct: bool
    invited_at: int = 0  # stream position of the bot's invite
    joined_at: int | None = None  # of the bot's join
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Media:
    """A file in the media repository."""

    data: bytes
    kind: str  # its content type
    name: str = ""


@dataclass
class Shown:
    """A message the bot shows: its text as read now (edits applied) and every version."""

    event_id: str
    room_id: str
    text: str
    versions: list[str]
    at: float


class FakeHomeserver(FakePlatform):
    """Floods are of "send" (retry_after_ms values); hung calls are "send" and "typing" in a
    room."""

    label = "homeserver"

    def __init__(self, token: str = "syt_fake_token"):
        super().__init__()
        self.token = token
        self.logins: dict[str, tuple[str, str]] = {token: (BOT, BOT_DEVICE)}  # → user, device
        self.position = 0
        self.rooms: dict[str, Room] = {}
        self.events: dict[str, dict[str, Any]] = {}
        self.shown: list[Shown] = []
        self.typing: list[tuple[str, float]] = []  # room, monotonic time
        self.account_data: dict[str, dict[str, Any]] = {}
        self.handed: dict[str, int] = {}  # event id → times a sync returned it
        self.unacked: dict[str, int] = {}  # message handed → the sync position it came with
        self.transactions: dict[str, str] = {}
        self.calls: list[tuple[str, str, int]] = []  # method, path, status
        self.media: dict[str, Media] = {}  # media id → file
        self.uploads: list[str] = []  # mxc URIs the bot uploaded
        self.downloads: list[str] = []  # media ids served
        self.authenticated_media = True  # false: only the legacy /_matrix/media/v3/download
        self.unsized_media = False  # true: files served without a Content-Length
        self.keys = Keys()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle --------------------------------------------------------------------------
    def __enter__(self) -> FakeHomeserver:
        self._server = start_http(_Handler, fake=self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        stop_http(self._server)

    @property
    def url(self) -> str:
        return http_url(self._server)

    # -- what tests do ----------------------------------------------------------------------
    def user_says(self, room_id: str, sender: str, content: dict[str, Any], group: bool) -> str:
        """A person's message in a room, made (with the bot invited) if new; its event id."""
        with self.lock:
            room = self.rooms.get(room_id)
            if room is None:
                members = {sender, f"@someone:{SERVER}"} if group else {sender}
                room = self.rooms[room_id] = Room(room_id, members, not group)
                room.invited_at = self._next()
            room.members.add(sender)
            event = self._event(room, sender, "m.room.message", content)
            self.lock.notify_all()
            return str(event["event_id"])

    def bot_joined_before(self, room_id: str) -> None:
        """The bot joined the room already (e.g. from another client): its history is old."""
        self._api_join(room_id)

    def bot_events(self, room_id: str) -> list[dict[str, Any]]:
        """What the bot sent in the room, as events (edits too)."""
        with self.lock:
            room = self.rooms[room_id]
            return [e for e in room.events if e["sender"] == BOT and e["type"] == "m.room.message"]

    def pictures(self, room_id: str) -> list[bytes]:
        """The images the bot showed in the room (`m.image` of an mxc it uploaded), oldest first."""
        with self.lock:
            sent = [e["content"] for e in self.rooms[room_id].events if e["sender"] == BOT]
            uris = [c.get("url") for c in sent if c.get("msgtype") == "m.image"]
            return [self.media_of(str(uri)).data for uri in uris]

    def texts(self, room_id: str) -> list[str]:
        with self.lock:
            return [m.text for m in self.shown if m.room_id == room_id]

    def first_sign(self, room_id: str, after: float) -> float | None:
        times = [t for r, t in self.typing if r == room_id and t >= after]
        times += [m.at for m in self.shown if m.room_id == room_id and m.at >= after]
        return min(times, default=None)

    def last_bot_event(self, room_id: str) -> str:
        with self.lock:
            return [m.event_id for m in self.shown if m.room_id == room_id][-1]

    # -- the API ----------------------------------------------------------------------------
    def call(
        self, method: str, path: str, query: dict[str, str], body: Any, login: tuple[str, str]
    ) -> Any:
        route = _route(method, path)
        if route is None:
            raise MatrixError(404, "M_UNRECOGNIZED", "Unrecognized request")
        name, args = route
        if name in ("send", "typing") and self.is_hung(name, args[0]):
            self.released.wait()
            raise MatrixError(502, "M_UNKNOWN", "Bad Gateway")
        user, device = login
        return getattr(self, f"_api_{name}")(
            *args, query=query, body=body, user=user, device=device
        )

    def _api_upload(self, body: Media, **_: Any) -> Any:
        with self.lock:
            if len(body.data) > MEDIA_LIMIT:
                raise MatrixError(413, "M_TOO_LARGE", "Cannot upload files larger than 50 MB")
            uri = self.store_media(body)
            self.uploads.append(uri)
            return {"content_uri": uri}

    def store_media(self, media: Media) -> str:
        """Keeps the file in the media repository; its mxc:// URI."""
        with self.lock:
            media_id = f"m{self._next()}{'x' * 12}"
            self.media[media_id] = media
            return f"mxc://{SERVER}/{media_id}"

    def media_of(self, uri: str) -> Media:
        with self.lock:
            return self.media[uri.removeprefix(f"mxc://{SERVER}/")]

    def _api_download(self, server: str, media_id: str, **_: Any) -> Any:
        if not self.authenticated_media:  # a server before Matrix 1.11
            raise MatrixError(404, "M_UNRECOGNIZED", "Unrecognized request")
        return self._media(server, media_id)

    def _api_legacy_download(self, server: str, media_id: str, **_: Any) -> Any:
        if self.authenticated_media:  # Matrix 1.11 servers freeze the old unauthenticated one
            raise MatrixError(404, "M_NOT_FOUND", "Not found")
        return self._media(server, media_id)

    def _media(self, server: str, media_id: str) -> Media:
        with self.lock:
            if server != SERVER or media_id not in self.media:
                raise MatrixError(404, "M_NOT_FOUND", "Not found")
            self.downloads.append(media_id)
            return self.media[media_id]

    def _api_whoami(self, user: str, device: str, **_: Any) -> Any:
        return {"user_id": user, "device_id": device}

    def _api_sync(self, query: dict[str, str], user: str, device: str, **_: Any) -> Any:
        since = query.get("since")
        after = int(since.removeprefix("s")) if since else None
        deadline = time.monotonic() + int(query.get("timeout") or 0) / 1000
        with self.lock:
            while True:
                if user == BOT:
                    rooms = self._rooms_since(after)
                else:
                    rooms = self._member_rooms_since(user, after)
                keys = self.keys.sync(user, device, after)
                left = deadline - time.monotonic()
                if rooms["join"] or rooms["invite"] or keys["to_device"]["events"] or left <= 0:
                    break
                self.lock.wait(left)
            if user == BOT:
                for info in rooms["join"].values():
                    for event in info["timeline"]["events"]:
                        self._hand(event)
            return {"next_batch": f"s{self.position}", "rooms": rooms, **keys}

    def _member_rooms_since(self, user: str, after: int | None) -> dict[str, Any]:
        """A person's sync (a real client in a test): the rooms they are in, all their events
        (state too) on a first sync, new ones after."""
        joined: dict[str, Any] = {}
        for room in self.rooms.values():
            events = [e for e in room.events if after is None or e["pos"] > after]
            if user in room.members and events:
                timeline = [{k: v for k, v in e.items() if k != "pos"} for e in events]
                joined[room.room_id] = {"timeline": {"events": timeline, "limited": False}}
        return {"join": joined, "invite": {}, "leave": {}}

    # -- end-to-end encryption: keys and to-device messages (matrix_keys.py) -----------------
    def add_login(self, user: str, device: str) -> str:
        """Another account's device (a person's client in a test); its access token."""
        token = f"syt_{user[1:].split(':')[0]}_{device}"
        with self.lock:
            self.logins[token] = (user, device)
        return token

    def encrypted_dm(self, room_id: str, person: str) -> None:
        """A direct room the person made with encryption on (as Element does), the bot invited."""
        with self.lock:
            room = self.rooms[room_id] = Room(room_id, {person}, True)
            self._event(room, person, "m.room.member", {"membership": "join"}, person)
            self._event(room, person, ENCRYPTION, {"algorithm": MEGOLM}, "")
            room.invited_at = self._next()
            self.lock.notify_all()

    def _api_keys_upload(self, body: dict[str, Any], user: str, device: str, **_: Any) -> Any:
        with self.lock:
            counts = self.keys.upload(user, device, body, self._next)
            self.lock.notify_all()
            return {"one_time_key_counts": counts}

    def _api_keys_query(self, body: dict[str, Any], **_: Any) -> Any:
        with self.lock:
            return self.keys.query(body.get("device_keys") or {})

    def _api_keys_claim(self, body: dict[str, Any], user: str, **_: Any) -> Any:
        with self.lock:
            return self.keys.claim(user, body.get("one_time_keys") or {})

    def _api_to_device(
        self, kind: str, txn: str, body: dict[str, Any], user: str, device: str, **_: Any
    ) -> Any:
        with self.lock:
            self.keys.send(user, device, kind, txn, body.get("messages") or {}, self._next)
            self.lock.notify_all()
            return {}

    def _api_state(self, room_id: str, kind: str, key: str | None, user: str, **_: Any) -> Any:
        with self.lock:
            room = self._joined(room_id, user)
            found = [
                e for e in room.events if e["type"] == kind and e.get("state_key") == (key or "")
            ]
            if not found:
                raise MatrixError(404, "M_NOT_FOUND", "Event not found.")
            return found[-1]["content"]

    def _hand(self, event: dict[str, Any]) -> None:
        self.handed[event["event_id"]] = self.handed.get(event["event_id"], 0) + 1
        if event["type"] == "m.room.message" and event["sender"] != BOT:
            self.unacked.setdefault(event["event_id"], self.position)

    def _rooms_since(self, after: int | None) -> dict[str, Any]:
        joined: dict[str, Any] = {}
        invited: dict[str, Any] = {}
        for room in self.rooms.values():
            if room.joined_at is None:
                if after is None or room.invited_at > after:
                    invited[room.room_id] = {"invite_state": {"events": [self._invite(room)]}}
                continue
            fresh = after is None or room.joined_at > after  # newly joined: its whole timeline
            events = [e for e in room.events if fresh or e["pos"] > after]  # type: ignore[operator]
            if events:
                timeline = [{k: v for k, v in e.items() if k != "pos"} for e in events]
                joined[room.room_id] = {"timeline": {"events": timeline, "limited": False}}
        return {"join": joined, "invite": invited, "leave": {}}

    def _invite(self, room: Room) -> dict[str, Any]:
        inviter = sorted(room.members)[0]
        content = {"membership": "invite", "is_direct": room.direct}
        return {"type": "m.room.member", "sender": inviter, "state_key": BOT, "content": content}

    def _api_join(self, room_id: str, **_: Any) -> Any:
        with self.lock:
            room = self.rooms.get(room_id)
            if room is None:
                raise MatrixError(403, "M_FORBIDDEN", "You are not invited to this room.")
            if room.joined_at is None:
                room.members.add(BOT)
                event = self._event(room, BOT, "m.room.member", {"membership": "join"}, BOT)
                room.joined_at = event["pos"]
                self.lock.notify_all()
            return {"room_id": room_id}

    def _api_members(self, room_id: str, user: str, **_: Any) -> Any:
        with self.lock:
            room = self._joined(room_id, user)
            return {"joined": {m: {"display_name": m[1:].split(":")[0]} for m in room.members}}

    def _api_event(self, room_id: str, event_id: str, user: str, **_: Any) -> Any:
        with self.lock:
            self._joined(room_id, user)
            event = self.events.get(event_id)
            if event is None or event["room_id"] != room_id:
                raise MatrixError(404, "M_NOT_FOUND", "Event not found.")
            return {k: v for k, v in event.items() if k != "pos"}

    def _api_send(
        self, room_id: str, kind: str, txn: str, body: dict[str, Any], user: str, **_: Any
    ) -> Any:
        if user != BOT:
            return self._member_sends(room_id, kind, body, user)
        with self.lock:
            room = self._joined(room_id)
            if txn in self.transactions:  # the same transaction again: the same event
                return {"event_id": self.transactions[txn]}
            wait = self.next_flood("send")
            if wait is not None:
                raise MatrixError(429, "M_LIMIT_EXCEEDED", "Too Many Requests", retry_after_ms=wait)
            if len(json.dumps(body).encode()) > EVENT_LIMIT:
                raise MatrixError(413, "M_TOO_LARGE", "event too large")
            text = kind == "m.room.message" and body.get("msgtype") not in ("m.image", "m.file")
            shown = self._show(room, body) if text else None
            event = self._event(room, BOT, kind, body)
            self.transactions[txn] = event["event_id"]
            if shown is not None:
                shown.event_id = event["event_id"]
            self.lock.notify_all()
            return {"event_id": event["event_id"]}

    def _member_sends(self, room_id: str, kind: str, body: dict[str, Any], user: str) -> Any:
        """A person's client sends (a real SDK in a test): the event, as the bot will sync it."""
        with self.lock:
            event = self._event(self._joined(room_id, user), user, kind, body)
            self.lock.notify_all()
            return {"event_id": event["event_id"]}

    def _show(self, room: Room, content: dict[str, Any]) -> Shown | None:
        """Applies an edit (None), or a new message's Shown (its event id set by the caller)."""
        relation = content.get("m.relates_to") or {}
        if relation.get("rel_type") == "m.replace":
            new = content.get("m.new_content")
            target = self.events.get(str(relation.get("event_id")))
            if not isinstance(new, dict) or target is None or target["sender"] != BOT:
                raise MatrixError(400, "M_BAD_JSON", "an edit needs m.new_content of your event")
            shown = next(m for m in self.shown if m.event_id == target["event_id"])
            shown.text = _visible(new)
            shown.versions.append(shown.text)
            return None
        text = _visible(content)
        self.shown.append(Shown("", room.room_id, text, [text], time.monotonic()))
        return self.shown[-1]

    def _api_typing(
        self, room_id: str, user_id: str, body: dict[str, Any], user: str, **_: Any
    ) -> Any:
        with self.lock:
            self._joined(room_id, user)
            if user_id != user:
                raise MatrixError(403, "M_FORBIDDEN", "Cannot set another user's typing state")
            if body.get("typing"):
                self.typing.append((room_id, time.monotonic()))
                self.lock.notify_all()
            return {}

    def _api_get_data(self, user_id: str, kind: str, user: str, **_: Any) -> Any:
        with self.lock:
            if user_id != user:
                raise MatrixError(403, "M_FORBIDDEN", "Cannot get account data for other users.")
            if kind not in self.account_data:
                raise MatrixError(404, "M_NOT_FOUND", "Account data not found")
            return self.account_data[kind]

    def _api_put_data(
        self, user_id: str, kind: str, body: dict[str, Any], user: str, **_: Any
    ) -> Any:
        with self.lock:
            if user_id != user:
                raise MatrixError(403, "M_FORBIDDEN", "Cannot add account data for other users.")
            token = str(body.get("next_batch") or "")
            upto = int(token.removeprefix("s")) if token.startswith("s") else 0
            covered = [e for e, at in self.unacked.items() if at <= upto]
            if self.hold_acks and covered:
                while self.hold_acks:  # the acknowledgement never arrives: lost on the way
                    self.lock.wait(0.5)
                raise MatrixError(504, "M_UNKNOWN", "Gateway Timeout")
            for event_id in covered:
                del self.unacked[event_id]
            self.account_data[kind] = body
            return {}

    def _joined(self, room_id: str, user: str = BOT) -> Room:
        room = self.rooms.get(room_id)
        if room is None or user not in room.members:
            raise MatrixError(403, "M_FORBIDDEN", "User not in room")
        return room

    def _next(self) -> int:
        self.position += 1
        return self.position

    def _event(
        self,
        room: Room,
        sender: str,
        kind: str,
        content: dict[str, Any],
        state_key: str | None = None,
    ) -> dict[str, Any]:
        position = self._next()
        event: dict[str, Any] = {
            "event_id": f"${position}abcdefghij:{SERVER}",
            "room_id": room.room_id,
            "sender": sender,
            "type": kind,
            "content": content,
            "origin_server_ts": int(time.time() * 1000),
            "pos": position,
        }
        if state_key is not None:
            event["state_key"] = state_key
        room.events.append(event)
        self.events[event["event_id"]] = event
        return event


MEDIA = "/_matrix/media/v3"
AUTHENTICATED_MEDIA = "/_matrix/client/v1/media"
ROUTES = [
    ("POST", MEDIA + r"/upload", "upload"),
    ("GET", AUTHENTICATED_MEDIA + r"/download/([^/]+)/([^/]+)(?:/[^/]+)?", "download"),
    ("GET", MEDIA + r"/download/([^/]+)/([^/]+)(?:/[^/]+)?", "legacy_download"),
    ("GET", r"/account/whoami", "whoami"),
    ("POST", r"/keys/upload", "keys_upload"),
    ("POST", r"/keys/query", "keys_query"),
    ("POST", r"/keys/claim", "keys_claim"),
    ("PUT", r"/sendToDevice/([^/]+)/([^/]+)", "to_device"),
    ("GET", r"/rooms/([^/]+)/state/([^/]+)(?:/([^/]*))?", "state"),
    ("GET", r"/sync", "sync"),
    ("POST", r"/join/([^/]+)", "join"),
    ("POST", r"/rooms/([^/]+)/join", "join"),
    ("GET", r"/rooms/([^/]+)/joined_members", "members"),
    ("GET", r"/rooms/([^/]+)/event/([^/]+)", "event"),
    ("PUT", r"/rooms/([^/]+)/send/([^/]+)/([^/]+)", "send"),
    ("PUT", r"/rooms/([^/]+)/typing/([^/]+)", "typing"),
    ("GET", r"/user/([^/]+)/account_data/([^/]+)", "get_data"),
    ("PUT", r"/user/([^/]+)/account_data/([^/]+)", "put_data"),
]


def _route(method: str, path: str) -> tuple[str, list[str]] | None:
    for verb, pattern, name in ROUTES:
        full = pattern if pattern.startswith("/_matrix/") else PREFIX + pattern
        match = re.fullmatch(full, path)
        if verb == method and match:
            return name, [unquote(part) if part is not None else None for part in match.groups()]
    return None


def _visible(content: dict[str, Any]) -> str:
    """What a client shows: the HTML's text when there is HTML, else the body."""
    if content.get("format") == "org.matrix.custom.html" and "formatted_body" in content:
        parser = _Text()
        parser.feed(str(content["formatted_body"]))
        parser.close()
        return "".join(parser.text)
    return str(content.get("body", ""))


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []

    def handle_data(self, data: str) -> None:
        self.text.append(data)


class _Handler(QuietHandler):
    fake: FakeHomeserver

    def answer(self, method: str) -> None:
        parts = urlsplit(self.path)
        raw = self.body()
        status, answer = 200, {}
        try:
            token = (self.headers.get("authorization") or "").removeprefix("Bearer ")
            login = self.fake.logins.get(token)
            if login is None:
                raise MatrixError(401, "M_UNKNOWN_TOKEN", "Invalid access token passed.")
            query = dict(parse_qsl(parts.query))
            if parts.path == MEDIA + "/upload":  # the body is the file itself
                kind = self.headers.get("content-type") or "application/octet-stream"
                body: Any = Media(raw, kind, query.get("filename", ""))
            else:
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    raise MatrixError(400, "M_NOT_JSON", "Content not JSON.") from None
            answer = self.fake.call(method, parts.path, query, body, login)
        except MatrixError as exc:
            status = exc.status
            answer = {"errcode": exc.errcode, "error": exc.error, **exc.extra}
        with self.fake.lock:
            self.fake.calls.append((method, parts.path, status))
        kind = answer.kind if isinstance(answer, Media) else "application/json"
        data = answer.data if isinstance(answer, Media) else json.dumps(answer).encode()
        if not (isinstance(answer, Media) and self.fake.unsized_media):
            self.reply(status, data, kind)
            return
        try:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("connection", "close")  # the body ends when the link does
            self.close_connection = True
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up (a timeout): nothing to answer
