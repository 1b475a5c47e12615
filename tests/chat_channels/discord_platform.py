"""The Discord fake (tests/fakes/discord_api.py) as the conformance suite's Platform."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.fakes.discord_api import TEXT_LIMIT, FakeDiscord


class DiscordPlatform:
    name = "discord"
    text_limit = TEXT_LIMIT

    def __init__(self, fake: FakeDiscord):
        self.fake = fake
        # The session a restarted service resumes: one per test, as one per installation.
        self.state_file = Path(tempfile.mkdtemp(prefix="discord-")) / "session.json"

    def env(self) -> dict[str, str]:
        return {
            "CHANNELS_DISCORD_TOKEN": self.fake.token,
            "CHANNELS_DISCORD_API_URL": self.fake.api_url,
            "CHANNELS_DISCORD_STATE_FILE": str(self.state_file),
        }

    def say(self, text: str, person: str, chat: str | None = None, **how: bool) -> str:
        return self.fake.user_says(
            text,
            user_id=person,
            chat_id=chat,
            group=how.get("group", False),
            mention=how.get("mention", False),
            reply_to_bot=how.get("reply_to_bot", False),
        )

    def send_attachment(
        self, data: bytes, name: str, person: str, caption: str = "", image: bool = True
    ) -> str:
        content_type = "image/png" if image else "text/plain; charset=utf-8"
        return self.fake.user_sends_file(data, name, person, caption, content_type)

    def pictures(self, chat: str) -> list[bytes | str]:
        with self.fake.lock:
            return [p for channel, p in self.fake.pictures if channel == chat]

    def texts(self, chat: str) -> list[str]:
        return self.fake.texts(chat)

    def wait_texts(self, chat: str, count: int, timeout: float = 30.0) -> list[str]:
        shown = lambda: [m.text for m in self.fake.shown if m.chat_id == chat]  # noqa: E731
        return list(self.fake.wait_for(lambda: len(shown()) >= count and shown(), timeout))

    def typed(self, chat: str) -> bool:
        return any(c == chat for c, _ in self.fake.typing)

    def first_sign(self, chat: str, after: float) -> float | None:
        return self.fake.first_sign(chat, after)

    def flood_sends(self, *retry_after: int) -> None:
        self.fake.flood("message", *retry_after)

    def hang_sends(self, chat: str) -> None:
        self.fake.hang("channel", chat)

    def hold_acks(self, hold: bool) -> None:
        """Discord keeps no acknowledgement: what a restart resumes from is the service's own
        saved sequence, written once the turn is queued. Nothing to hold on the platform."""

    def deliveries(self, message_id: str) -> int:
        with self.fake.lock:
            return self.fake.handed.get(message_id, 0)
