"""Discord end to end: discord.py's REST client and the channel's gateway reader against the
fake Discord on loopback, the channels service as its own process, the real stack behind it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.chat_channels.conformance import ChannelConformance, Start
from tests.chat_channels.discord_platform import DiscordPlatform
from tests.fakes.discord_api import FakeDiscord


@pytest.fixture
def platform() -> Iterator[DiscordPlatform]:
    with FakeDiscord() as fake:
        yield DiscordPlatform(fake)


class TestDiscord(ChannelConformance):
    def test_a_wrong_token_shows_in_readyz(
        self, platform: DiscordPlatform, start_service: Start
    ) -> None:
        env = {**self.settings(platform), "CHANNELS_DISCORD_TOKEN": "wrong"}
        service = start_service(env)
        platform.fake.wait_for(lambda: any(s == 401 for _, _, s in platform.fake.calls))
        reply = service.readyz()
        assert reply.status_code == 503
        state = reply.json()["channels"]["discord"]
        assert state["state"] == "reconnecting" and "token" in state["error"].lower()
