"""Tool hints (CHANNELS_TOOL_HINTS): while a turn works, the chat's streamed message names the tool
it runs, a credential in its arguments masked; the answer then replaces the hint. Telegram's
fake (it keeps every version of an edited message)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.chat_channels.conformance import Start, _settled
from tests.chat_channels.platform import new_person
from tests.chat_channels.telegram_platform import TelegramPlatform
from tests.fakes import FakeLLM
from tests.fakes.telegram_api import FakeTelegram

SECRET = "ghp_0123456789abcdefXYZ"


@pytest.fixture
def platform() -> Iterator[TelegramPlatform]:
    with FakeTelegram() as fake:
        yield TelegramPlatform(fake)


def test_the_tool_a_turn_runs_shows_in_the_chat_until_the_answer(
    platform: TelegramPlatform, start_service: Start, llm: FakeLLM
) -> None:
    person = new_person()
    env = {**platform.env(), "CHANNELS_TELEGRAM_ALLOW_FROM": person, "CHANNELS_TOOL_HINTS": "true"}
    start_service(env).ready()
    llm.reply_tool_calls(("read_file", {"path": f"keys/token={SECRET}.txt"}))
    llm.reply_text("There is no such file.")
    platform.say("read my key file", person)
    assert _settled(platform, person) == "There is no such file."
    [message] = [m for m in platform.fake.shown if m.chat_id == int(person)]
    hints = [v for v in message.versions if v.startswith("🔧 read_file: keys/token=")]
    assert hints, message.versions  # the hint came first, in the message the answer took
    assert all(SECRET not in version for version in message.versions)
    assert "***" in hints[0]
