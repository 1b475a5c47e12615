"""The fake homeserver (tests/fakes/matrix_homeserver.py) as the conformance suite's Platform.

A person `9012` is `@u9012:fake.local`, their direct room `!dm9012:fake.local`; a group
`-1009013` is the room `!g-1009013:fake.local` (with a third member, so not direct)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from channels.matrix.rooms import chat_id_of

from tests.fakes.matrix_homeserver import BOT, SERVER, FakeHomeserver, Media


class MatrixPlatform:
    name = "matrix"
    text_limit = 2500

    def __init__(self, fake: FakeHomeserver, store: Path):
        self.fake = fake
        self.store = store  # the bot's end-to-end keys

    def env(self) -> dict[str, str]:
        return {
            "CHANNELS_MATRIX_ACCESS_TOKEN": self.fake.token,
            "CHANNELS_MATRIX_HOMESERVER": self.fake.url,
            "CHANNELS_MATRIX_POLL_TIMEOUT": "1",
            "CHANNELS_MATRIX_STORE_DIR": str(self.store),
        }

    def sender_id(self, person: str) -> str:
        return f"@u{person}:{SERVER}"

    def chat_id(self, chat: str) -> str:
        return chat_id_of(self.room(chat))

    def room(self, chat: str) -> str:
        return f"!g{chat}:{SERVER}" if chat.startswith("-") else f"!dm{chat}:{SERVER}"

    def say(self, text: str, person: str, chat: str | None = None, **how: bool) -> str:
        content: dict[str, Any] = {"msgtype": "m.text", "body": text}
        room = self.room(chat or person)
        if how.get("mention"):
            content["body"] = f"crayfish: {text}"
            content["m.mentions"] = {"user_ids": [BOT]}
        if how.get("reply_to_bot"):
            earlier = self.fake.last_bot_event(room)
            content["body"] = f"> <{BOT}> earlier\n\n{text}"  # older clients' fallback
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": earlier}}
        return self.fake.user_says(room, self.sender_id(person), content, how.get("group", False))

    def send_attachment(
        self,
        data: bytes,
        name: str,
        person: str,
        caption: str = "",
        image: bool = True,
        size: int | None = None,
    ) -> str:
        """As the Platform's; `size` is the size the event states (None: the true one, 0:
        not stated)."""
        kind = ("image/png" if image else "text/plain") if "." in name else ""
        uri = self.fake.store_media(Media(data, kind or "application/octet-stream", name))
        content: dict[str, Any] = {
            "msgtype": "m.image" if image else "m.file",
            "body": caption or name,  # Matrix 1.10: a body apart from filename is a caption
            "filename": name,
            "url": uri,
            "info": {"mimetype": kind, "size": len(data) if size is None else size},
        }
        if size == 0:
            del content["info"]["size"]
        room = self.room(person)
        return self.fake.user_says(room, self.sender_id(person), content, False)

    def pictures(self, chat: str) -> list[bytes | str]:
        return list(self.fake.pictures(self.room(chat)))

    def texts(self, chat: str) -> list[str]:
        return self.fake.texts(self.room(chat))

    def wait_texts(self, chat: str, count: int, timeout: float = 30.0) -> list[str]:
        shown = lambda: self.fake.texts(self.room(chat))  # noqa: E731
        return list(self.fake.wait_for(lambda: len(shown()) >= count and shown(), timeout))

    def typed(self, chat: str) -> bool:
        return any(room == self.room(chat) for room, _ in self.fake.typing)

    def first_sign(self, chat: str, after: float) -> float | None:
        return self.fake.first_sign(self.room(chat), after)

    def flood_sends(self, *retry_after: int) -> None:
        self.fake.flood("send", *(1000 * seconds for seconds in retry_after))

    def hang_sends(self, chat: str) -> None:
        for call in ("send", "typing"):
            self.fake.hang(call, self.room(chat))

    def hold_acks(self, hold: bool) -> None:
        with self.fake.lock:
            self.fake.hold_acks = hold
            self.fake.lock.notify_all()

    def deliveries(self, message_id: str) -> int:
        with self.fake.lock:
            return self.fake.handed.get(message_id, 0)
