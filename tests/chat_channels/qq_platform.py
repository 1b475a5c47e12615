"""The NapCat fake (tests/fakes/napcat.py) as the conformance suite's Platform. The suite's
group ids (`-100…`) become QQ group numbers; the channel's chat id of a group is `g<number>`."""

from __future__ import annotations

from tests.fakes.napcat import TEXT_LIMIT, FakeNapCat


class QQPlatform:
    name = "qq"
    text_limit = TEXT_LIMIT

    def __init__(self, fake: FakeNapCat):
        self.fake = fake

    def env(self) -> dict[str, str]:
        return {"CHANNELS_QQ_URL": self.fake.url, "CHANNELS_QQ_ACCESS_TOKEN": self.fake.token}

    def say(self, text: str, person: str, chat: str | None = None, **how: bool) -> str:
        message_id = self.fake.user_says(
            text,
            user_id=int(person),
            group_id=_group_number(chat) if chat else None,
            mention=how.get("mention", False),
            reply_to_bot=how.get("reply_to_bot", False),
        )
        return str(message_id)

    def send_attachment(
        self, data: bytes, name: str, person: str, caption: str = "", image: bool = True
    ) -> str:
        return str(self.fake.user_sends_file(data, name, int(person), caption, image))

    def pictures(self, chat: str) -> list[bytes | str]:
        with self.fake.media.lock:
            return [picture for c, picture in self.fake.media.pictures if c == _chat(chat)]

    def texts(self, chat: str) -> list[str]:
        return self.fake.texts(_chat(chat))

    def wait_texts(self, chat: str, count: int, timeout: float = 30.0) -> list[str]:
        shown = lambda: self.fake.texts(_chat(chat))  # noqa: E731
        return list(self.fake.wait_for(lambda: len(shown()) >= count and shown(), timeout))

    def typed(self, chat: str) -> bool:
        return any(c == _chat(chat) for c, _ in self.fake.typing)

    def first_sign(self, chat: str, after: float) -> float | None:
        return self.fake.first_sign(_chat(chat), after)

    def flood_sends(self, *retry_after: int) -> None:
        self.fake.flood("send", *retry_after)

    def hang_sends(self, chat: str) -> None:
        for action in ("send_private_msg", "send_group_msg", "set_input_status"):
            self.fake.hang(action, _chat(chat))

    def hold_acks(self, hold: bool) -> None:
        raise NotImplementedError("OneBot v11 has no acknowledgement to hold")

    def deliveries(self, message_id: str) -> int:
        return self.fake.handed.get(int(message_id), 0)


def _group_number(chat: str) -> int:
    return int(chat.removeprefix("-100"))


def _chat(chat: str) -> str:
    return f"g{_group_number(chat)}" if chat.startswith("-") else chat
