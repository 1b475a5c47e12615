"""The Slack fake (tests/fakes/slack_api.py) as the conformance suite's Platform. The suite's
ids are used as Slack's as they are (a person's id is their user id and their direct-message
channel's id, a group's id a channel's), since it compares them with the chat ids the service
reports; Slack's real ones (`U…`, `D…`, `C…`) are opaque strings to the channel all the same."""

from __future__ import annotations

from tests.fakes.slack_api import BOT_USER, FakeSlack

TEXT_LIMIT = 4000  # the channel's own limit (Slack's advice), which pieces must keep


def channel_of(chat: str) -> str:
    return chat


class SlackPlatform:
    name = "slack"
    text_limit = TEXT_LIMIT

    def __init__(self, fake: FakeSlack):
        self.fake = fake

    def env(self) -> dict[str, str]:
        return {
            "CHANNELS_SLACK_BOT_TOKEN": self.fake.bot_token,
            "CHANNELS_SLACK_APP_TOKEN": self.fake.app_token,
            "CHANNELS_SLACK_API_URL": self.fake.url,
        }

    def say(self, text: str, person: str, chat: str | None = None, **how: bool) -> str:
        channel = channel_of(chat or person)
        if how.get("mention"):
            text = f"<@{BOT_USER}> {text}"
        thread = None
        if how.get("reply_to_bot"):  # Slack's replies are a thread under the bot's message
            thread = self.fake.bot_messages(channel, top_level=True)[-1].ts
        kind = "channel" if how.get("group") else "im"
        parent = BOT_USER if thread else None
        return self.fake.user_says(text, person, channel, kind, thread, parent)

    def send_attachment(
        self, data: bytes, name: str, person: str, caption: str = "", image: bool = True
    ) -> str:
        mimetype = "image/png" if image else "text/plain"
        return self.fake.user_shares_file(data, name, person, channel_of(person), mimetype, caption)

    def pictures(self, chat: str) -> list[bytes | str]:
        with self.fake.lock:
            return [p for channel, p in self.fake.pictures if channel == channel_of(chat)]

    def texts(self, chat: str) -> list[str]:
        return self.fake.texts(channel_of(chat))

    def wait_texts(self, chat: str, count: int, timeout: float = 30.0) -> list[str]:
        channel = channel_of(chat)
        shown = lambda: [m.text for m in self.fake.shown if m.channel == channel]  # noqa: E731
        return list(self.fake.wait_for(lambda: len(shown()) >= count and shown(), timeout))

    def typed(self, chat: str) -> bool:
        return any(c == channel_of(chat) for c, _, _ in self.fake.actions)

    def first_sign(self, chat: str, after: float) -> float | None:
        return self.fake.first_sign(channel_of(chat), after)

    def flood_sends(self, *retry_after: int) -> None:
        self.fake.flood("chat.postMessage", *retry_after)
        self.fake.flood("chat.update", *retry_after)

    def hang_sends(self, chat: str) -> None:
        for method in ("chat.postMessage", "chat.update", "assistant.threads.setStatus"):
            self.fake.hang(method, channel_of(chat))

    def hold_acks(self, hold: bool) -> None:
        with self.fake.lock:
            self.fake.hold_acks = hold
            self.fake.lock.notify_all()

    def deliveries(self, message_id: str) -> int:
        with self.fake.lock:
            return self.fake.handed.get(message_id, 0)
