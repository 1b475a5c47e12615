"""QQ end to end: the channel's OneBot v11 client against the fake NapCat's forward WebSocket
on loopback, the channels service as its own process, the real stack behind it; the
conformance suite (but for redelivery, which OneBot does not have) and QQ's own tests."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.chat_channels.conformance import ChannelConformance, Start
from tests.chat_channels.platform import new_person
from tests.chat_channels.qq_platform import QQPlatform
from tests.fakes import FakeLLM
from tests.fakes.napcat import FakeNapCat

NO_REDELIVERY = (
    "OneBot v11 pushes each event once and has no acknowledgement: a message not queued "
    "before a crash is never sent again, so there is nothing for the channel to wait for"
)


@pytest.fixture
def platform() -> Iterator[QQPlatform]:
    with FakeNapCat() as fake:
        yield QQPlatform(fake)


class TestQQ(ChannelConformance):
    def test_killed_before_the_turn_was_queued_the_message_is_answered_once(self) -> None:  # type: ignore[override]
        pytest.skip(NO_REDELIVERY)

    def test_killed_after_queueing_before_the_ack_the_repeat_is_recognised(self) -> None:  # type: ignore[override]
        pytest.skip(NO_REDELIVERY)

    def test_markdown_arrives_as_plain_text_and_cq_codes_stay_text(
        self, platform: QQPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_text(
            "# Plan\n\n- **bold** step [CQ:at,qq=all]\n- [docs](https://example.org/a_b)"
        )
        platform.say("plan?", person)
        shown = platform.wait_texts(person, 1)
        assert shown == ["Plan\n\n• bold step [CQ:at,qq=all]\n• docs (https://example.org/a_b)"]
        sends = [p for a, p, _ in platform.fake.calls if a == "send_private_msg"]
        assert [s["type"] for s in sends[-1]["message"]] == ["text"]  # never parsed as a code

    def test_a_wrong_access_token_shows_in_readyz(
        self, platform: QQPlatform, start_service: Start
    ) -> None:
        env = {**self.settings(platform), "CHANNELS_QQ_ACCESS_TOKEN": "wrong"}
        service = start_service(env)
        platform.fake.wait_for(lambda: platform.fake.refused_tokens >= 1)
        deadline = time.monotonic() + 15
        while not (state := service.readyz().json()["channels"]["qq"])["error"]:
            assert time.monotonic() < deadline, state
            time.sleep(0.1)
        assert service.readyz().status_code == 503
        assert state["state"] == "reconnecting" and "token" in state["error"].lower()

    def test_a_picture_by_url_goes_to_napcat_to_fetch(
        self, platform: QQPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        url = "https://example.org/chart.png"
        llm.reply_text(f"See ![the chart]({url})")
        platform.say("chart?", person)
        platform.wait_texts(person, 1)
        platform.fake.wait_for(lambda: platform.pictures(person))
        assert platform.pictures(person) == [url]  # the channel itself fetched nothing

    def test_a_file_napcat_cannot_hand_over_is_named_and_the_message_still_goes(
        self, platform: QQPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        """A file NapCat no longer has (get_file fails): OneBot sends nothing again, so the
        message goes on without it and the chat is told."""
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_text("Read your note.")
        platform.fake.media.lost = True
        platform.send_attachment(b"gone", "gone.txt", person, caption="my note", image=False)
        shown = platform.wait_texts(person, 2)
        assert any(t.startswith("⚠️ Not taken: gone.txt") for t in shown), shown
        assert "Read your note." in shown
        assert "my note" in str(llm.requests[0]["messages"])
