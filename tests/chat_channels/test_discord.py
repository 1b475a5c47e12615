"""Discord end to end: discord.py's REST client and the channel's gateway reader against the
fake Discord on loopback, the channels service as its own process, the real stack behind it."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.chat_channels.conformance import PNG, ChannelConformance, Start, user_images
from tests.chat_channels.discord_platform import DiscordPlatform
from tests.chat_channels.platform import new_person
from tests.fakes import FakeLLM
from tests.fakes.discord_api import FakeDiscord


@pytest.fixture
def platform() -> Iterator[DiscordPlatform]:
    with FakeDiscord() as fake:
        platform = DiscordPlatform(fake)
        yield platform
        shutil.rmtree(platform.state_file.parent, ignore_errors=True)


class TestDiscord(ChannelConformance):
    def test_killed_after_queueing_before_the_ack_the_repeat_is_recognised(
        self, platform: DiscordPlatform, start_service: Start, llm: FakeLLM, owner: httpx.Client
    ) -> None:
        """Discord keeps no acknowledgement: a restart resumes from the sequence the service
        saved once the turn was queued. The crash between queueing and that save is made by
        putting back the file as it was before the message; Discord then sends it again."""
        person = new_person()
        env = self.settings(platform, allow_from=person)
        llm.reply_text("Warm.")
        first = start_service(env)
        first.ready()
        platform.say("warm-up", person)  # the session is saved once a dispatch is handled
        platform.fake.wait_for(lambda: platform.texts(person) == ["Warm."])
        llm.reply_text("Answered once.", delay=1.0)
        llm.requests.clear()
        before = platform.state_file.read_text()
        message = platform.say("once, please", person)
        platform.fake.wait_for(lambda: len(llm.requests) == 1)  # queued and running
        platform.fake.wait_for(lambda: platform.state_file.read_text() != before)  # and saved
        first.kill()
        platform.state_file.write_text(before)
        start_service(env).ready()
        platform.fake.wait_for(lambda: platform.deliveries(message) >= 2)
        time.sleep(2.0)
        assert platform.texts(person) == ["Warm.", "Answered once."]
        assert len(llm.requests) == 1

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

    def test_attachments_are_read_from_the_cdn_without_the_bot_token(
        self, platform: DiscordPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_text("A pixel.")
        platform.fake.user_sends_file(PNG, "pixel.png", person, "and this?", "image/png")
        platform.fake.wait_for(lambda: platform.texts(person) == ["A pixel."])
        assert user_images(llm.requests[0])
        with platform.fake.lock:
            requests = list(platform.fake.cdn_requests)
        assert len(requests) == 1 and requests[0][0].endswith("/pixel.png")
        assert all(auth == "" for _, auth in requests)  # the CDN never sees the token

    def test_an_oversize_attachment_is_refused_in_the_chat_and_its_text_still_asked(
        self, platform: DiscordPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_text("Understood.")
        big = b"x" * 800_000  # over the 700 KB a message may bring
        platform.fake.user_sends_file(big, "big.bin", person, "see attached", "application/zip")
        texts = platform.fake.wait_for(
            lambda: len(platform.texts(person)) >= 2 and platform.texts(person)
        )
        assert any("Not taken: big.bin" in t for t in texts), texts
        assert "see attached" in str(llm.requests[0]["messages"])
        with platform.fake.lock:
            assert platform.fake.cdn_requests == []  # refused by its stated size, unread

    def test_an_image_url_the_answer_shows_follows_as_an_embed(
        self, platform: DiscordPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_text("A cat:\n\n![a cat](https://example.org/cat.png)")
        platform.say("show me a cat", person)
        platform.fake.wait_for(lambda: platform.pictures(person))
        assert platform.pictures(person) == ["https://example.org/cat.png"]
        assert any("A cat" in text for text in platform.texts(person))
