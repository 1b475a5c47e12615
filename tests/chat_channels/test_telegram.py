"""Telegram end to end: python-telegram-bot against the fake Bot API on loopback, the channels
service as its own process, the real stack behind it; the conformance suite and Telegram's own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.chat_channels.conformance import ChannelConformance, Start
from tests.chat_channels.platform import new_person
from tests.chat_channels.telegram_platform import TelegramPlatform
from tests.fakes import FakeLLM
from tests.fakes.telegram_api import FakeTelegram
from tests.stacks import running_stack


@pytest.fixture
def platform() -> Iterator[TelegramPlatform]:
    with FakeTelegram() as fake:
        yield TelegramPlatform(fake)


class TestTelegram(ChannelConformance):
    def test_markdown_is_shown_as_telegram_renders_it(
        self, platform: TelegramPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_text("# Plan\n\n- **bold** step with `a < b`\n- [docs](https://example.org/a_b)")
        platform.say("plan?", person)
        platform.wait_texts(person, 1)
        sent = platform.fake.wait_for(
            lambda: [
                m for m in platform.fake.shown if m.chat_id == int(person) and "docs" in m.text
            ]
        )[0]
        assert sent.text == "Plan\n\n• bold step with a < b\n• docs"
        assert "<b>bold</b>" in sent.html and '<a href="https://example.org/a_b">' in sent.html

    def test_a_wrong_token_shows_in_readyz_and_nothing_else_breaks(
        self, platform: TelegramPlatform, start_service: Start
    ) -> None:
        env = {**self.settings(platform), "CHANNELS_TELEGRAM_TOKEN": "999:wrong"}
        service = start_service(env)
        platform.fake.wait_for(lambda: any(s == 401 for _, _, s in platform.fake.calls))
        reply = service.readyz()
        assert reply.status_code == 503
        state = reply.json()["channels"]["telegram"]
        assert state["state"] == "reconnecting" and "token" in state["error"].lower()


def test_the_stack_runs_the_channels_service_when_telegram_is_configured() -> None:
    """`make run`'s launcher: the channels service starts with the orchestrators' address and
    the channels token (never the owner's), and answers in Telegram."""
    with FakeLLM() as llm, FakeTelegram() as fake:
        platform = TelegramPlatform(fake)
        person = new_person()
        env = {
            **platform.env(),
            "CHANNELS_TELEGRAM_ALLOW_FROM": person,
            "CRAYFISH_API_TOKEN": "owner-token",
            "CRAYFISH_CHANNELS_TOKEN": "channels-token",
        }
        with running_stack(llm.base_url, env=env, channels=True) as stack:
            llm.reply_text("hello from the stack")
            platform.say("hi", person)
            answered = lambda: fake.texts(int(person)) == ["hello from the stack"]  # noqa: E731
            assert fake.wait_for(answered, 60)
            assert "channels" in stack.processes
