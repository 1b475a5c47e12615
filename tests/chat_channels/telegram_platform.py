"""The Telegram fake (tests/fakes/telegram_api.py) as the conformance suite's Platform."""

from __future__ import annotations

from tests.fakes.telegram_api import BOT_USERNAME, TEXT_LIMIT, FakeTelegram


class TelegramPlatform:
    name = "telegram"
    text_limit = TEXT_LIMIT

    def __init__(self, fake: FakeTelegram):
        self.fake = fake
        self.updates: dict[str, int] = {}  # message id → its update id

    def env(self) -> dict[str, str]:
        return {
            "CHANNELS_TELEGRAM_TOKEN": self.fake.token,
            "CHANNELS_TELEGRAM_API_URL": self.fake.url,
            "CHANNELS_TELEGRAM_POLL_TIMEOUT": "1",
        }

    def say(self, text: str, person: str, chat: str | None = None, **how: bool) -> str:
        if how.get("mention"):
            text = f"@{BOT_USERNAME} {text}"
        message_id = self.fake.user_says(
            text,
            user_id=int(person),
            chat_id=int(chat) if chat else None,
            group=how.get("group", False),
            username=f"user{person}",
            reply_to_bot=how.get("reply_to_bot", False),
        )
        self.updates[str(message_id)] = self.fake.next_update - 1
        return str(message_id)

    def send_attachment(
        self, data: bytes, name: str, person: str, caption: str = "", image: bool = True
    ) -> str:
        sent = self.fake.user_sends_file(data, int(person), caption, photo=image, name=name)
        self.updates[str(sent)] = self.fake.next_update - 1
        return str(sent)

    def pictures(self, chat: str) -> list[bytes | str]:
        with self.fake.lock:
            return [photo for chat_id, photo in self.fake.photos if chat_id == int(chat)]

    def texts(self, chat: str) -> list[str]:
        return self.fake.texts(int(chat))

    def wait_texts(self, chat: str, count: int, timeout: float = 30.0) -> list[str]:
        shown = lambda: [m.text for m in self.fake.shown if m.chat_id == int(chat)]  # noqa: E731
        return list(self.fake.wait_for(lambda: len(shown()) >= count and shown(), timeout))

    def typed(self, chat: str) -> bool:
        return any(c == int(chat) and a == "typing" for c, a, _ in self.fake.actions)

    def first_sign(self, chat: str, after: float) -> float | None:
        return self.fake.first_sign(int(chat), after)

    def flood_sends(self, *retry_after: int) -> None:
        self.fake.flood("sendMessage", *retry_after)
        self.fake.flood("editMessageText", *retry_after)

    def hang_sends(self, chat: str) -> None:
        for method in ("sendMessage", "editMessageText", "sendChatAction"):
            self.fake.hang(method, int(chat))

    def hold_acks(self, hold: bool) -> None:
        with self.fake.lock:
            self.fake.hold_acks = hold
            self.fake.lock.notify_all()

    def deliveries(self, message_id: str) -> int:
        return self.fake.handed.get(self.updates[message_id], 0)
