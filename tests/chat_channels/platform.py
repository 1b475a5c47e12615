"""What the conformance suite needs of a platform's fake: how to point the channels service at
it, make people talk, read what the bot shows, and make the platform misbehave. A new channel
adds one of these for its fake and a test module subclassing `ChannelConformance`."""

from __future__ import annotations

import itertools
from typing import Protocol

_ids = itertools.count(9000)


def new_person() -> str:
    """An id no other test used: chats, pairings and sessions of the shared stack stay apart."""
    return str(next(_ids))


class Platform(Protocol):
    name: str  # the channel's name
    text_limit: int

    def env(self) -> dict[str, str]:
        """The channels service's settings that point this channel at the fake."""

    def say(self, text: str, person: str, chat: str | None = None, **how: bool) -> str:
        """A person's message (in their private chat, or `chat`); `how`: group, mention,
        reply_to_bot. Returns the platform's message id."""

    def send_attachment(
        self, data: bytes, name: str, person: str, caption: str = "", image: bool = True
    ) -> str:
        """A person sends a file in their private chat (a picture when `image`; else a file
        named `name`), with `caption` as its text. Returns the platform's message id."""

    def pictures(self, chat: str) -> list[bytes | str]:
        """The images the bot showed in the chat, oldest first: the bytes it uploaded, or the
        URL it gave the platform to fetch."""

    def texts(self, chat: str) -> list[str]:
        """What the bot shows in the chat, oldest first, each as it reads now."""

    def wait_texts(self, chat: str, count: int, timeout: float = 30.0) -> list[str]:
        """The chat's texts once there are at least `count`."""

    def typed(self, chat: str) -> bool:
        """Whether a typing indicator was shown in the chat."""

    def first_sign(self, chat: str, after: float) -> float | None:
        """When (time.monotonic) typing or words first showed in the chat after `after`."""

    def flood_sends(self, *retry_after: int) -> None:
        """The next sends answer 429 with these retry_after values."""

    def hang_sends(self, chat: str) -> None:
        """Sends to this chat never answer."""

    def hold_acks(self, hold: bool) -> None:
        """While held, a receive that would acknowledge messages never answers."""

    def deliveries(self, message_id: str) -> int:
        """How often the platform handed this message to the bot."""
