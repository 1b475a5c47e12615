"""The Feishu fake (tests/fakes/feishu_api.py) as the conformance suite's Platform. A person's
open_id and the chat_id of their direct chat are the suite's id (the suite compares a reply's
chat with it; Feishu's ids are opaque strings); a group `-100N` is `oc_gN`."""

from __future__ import annotations

from tests.fakes.feishu_api import APP_ID, APP_SECRET, TEXT_LIMIT, FakeFeishu


class FeishuPlatform:
    name = "feishu"
    text_limit = TEXT_LIMIT

    def __init__(self, fake: FakeFeishu):
        self.fake = fake

    def env(self) -> dict[str, str]:
        return {
            "CHANNELS_FEISHU_APP_ID": APP_ID,
            "CHANNELS_FEISHU_APP_SECRET": APP_SECRET,
            "CHANNELS_FEISHU_DOMAIN": self.fake.url,
        }

    def say(self, text: str, person: str, chat: str | None = None, **how: bool) -> str:
        chat_id = _chat(chat or person)
        reply_to = self.fake.last_bot_message(chat_id) if how.get("reply_to_bot") else ""
        if how.get("reply_to_bot") and not reply_to:
            raise AssertionError("nothing of the bot's to reply to in " + chat_id)
        return self.fake.user_says(
            text,
            open_id=person,
            chat_id=chat_id,
            group=how.get("group", False),
            mention=how.get("mention", False),
            reply_to=reply_to,
        )

    def send_attachment(
        self, data: bytes, name: str, person: str, caption: str = "", image: bool = True
    ) -> str:
        return self.fake.user_sends_file(data, name, person, caption, image)

    def pictures(self, chat: str) -> list[bytes | str]:
        with self.fake.media.lock:
            return [picture for c, picture in self.fake.media.pictures if c == _chat(chat)]

    def texts(self, chat: str) -> list[str]:
        return self.fake.texts(_chat(chat))

    def wait_texts(self, chat: str, count: int, timeout: float = 30.0) -> list[str]:
        shown = lambda: self.fake.texts(_chat(chat))  # noqa: E731
        return list(self.fake.wait_for(lambda: len(shown()) >= count and shown(), timeout))

    def typed(self, chat: str) -> bool:
        return any(c == _chat(chat) and e == "Typing" for c, e, _ in self.fake.reactions)

    def first_sign(self, chat: str, after: float) -> float | None:
        return self.fake.first_sign(_chat(chat), after)

    def flood_sends(self, *retry_after: int) -> None:
        self.fake.flood("message", *retry_after)

    def hang_sends(self, chat: str) -> None:
        self.fake.hang("message", _chat(chat))

    def hold_acks(self, hold: bool) -> None:
        with self.fake.lock:
            self.fake.hold_acks = hold
            self.fake.lock.notify_all()

    def deliveries(self, message_id: str) -> int:
        return self.fake.handed.get(message_id, 0)


def _chat(chat: str) -> str:
    return f"oc_g{chat.removeprefix('-100')}" if chat.startswith("-") else chat
