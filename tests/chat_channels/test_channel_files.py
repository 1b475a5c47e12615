"""Files in chats, with Telegram's fake and a model that sees images: a photo reaches the model
through the orchestrator's image path (stored, checked, sent as an image part); another file
lands in the workspace's inbox/ under a safe name, and the model is told its path."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator

import pytest

from tests.chat_channels.conformance import Start, _text_with
from tests.chat_channels.platform import new_person
from tests.chat_channels.telegram_platform import TelegramPlatform
from tests.fakes import FakeLLM, Reply
from tests.fakes.completions import ToolCall
from tests.fakes.telegram_api import FakeTelegram

# A valid 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.fixture
def platform() -> Iterator[TelegramPlatform]:
    with FakeTelegram() as fake:
        yield TelegramPlatform(fake)


def open_to(platform: TelegramPlatform, person: str) -> dict[str, str]:
    return {**platform.env(), "CHANNELS_TELEGRAM_ALLOW_FROM": person}


def _user_images(body: dict[str, object]) -> list[str]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [
        str(part["image_url"]["url"])
        for message in messages
        if message["role"] == "user" and isinstance(message["content"], list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


def test_a_photo_reaches_the_model_as_an_image(
    platform: TelegramPlatform, start_service: Start, llm: FakeLLM
) -> None:
    person = new_person()
    start_service(open_to(platform, person)).ready()
    llm.reply_text("A single pixel.")
    platform.fake.user_sends_file(PNG, int(person), caption="what is this?")
    assert _text_with(platform, person, "A single pixel.") == "A single pixel."
    images = _user_images(llm.requests[0])
    assert images == [f"data:image/png;base64,{base64.b64encode(PNG).decode()}"]
    asked = str(llm.requests[0]["messages"])
    assert "what is this?" in asked


def test_a_file_lands_in_the_inbox_and_the_model_reads_it_there(
    platform: TelegramPlatform, start_service: Start, llm: FakeLLM
) -> None:
    person = new_person()
    start_service(open_to(platform, person)).ready()

    def read_what_was_sent(body: dict[str, object]) -> Reply:
        said = str(body["messages"])
        path = re.search(r"(inbox/[\w.-]+) \(17 bytes\)", said)
        assert path is not None, said
        arguments = json.dumps({"path": path[1]})
        return Reply(tool_calls=[ToolCall("read_file", arguments, "call_read")])

    llm.reply_with(read_what_was_sent)
    llm.reply_with(lambda body: Reply(text=f"It says: {_last_tool_result(body)}"))
    name = "../../.bashrc evil name.txt"  # a hostile name: kept to a safe basename
    platform.fake.user_sends_file(b"quarterly numbers", int(person), photo=False, name=name)
    answer = _text_with(platform, person, "It says:")
    assert "quarterly numbers" in answer
    asked = str(llm.requests[0]["messages"])
    assert re.search(r"inbox/[0-9a-f]{8}-bashrc_evil_name\.txt \(17 bytes\)", asked), asked


def _last_tool_result(body: dict[str, object]) -> str:
    messages = body["messages"]
    assert isinstance(messages, list)
    return str([m["content"] for m in messages if m["role"] == "tool"][-1])[:300]


def test_an_image_the_answer_shows_is_sent_as_a_photo(
    platform: TelegramPlatform, start_service: Start, llm: FakeLLM
) -> None:
    person = new_person()
    start_service(open_to(platform, person)).ready()
    url = "https://example.com/chart.png"
    llm.reply_text(f"Here is the chart:\n\n![chart]({url})")
    platform.say("draw me a chart", person)
    _text_with(platform, person, "Here is the chart")
    sent = platform.fake.wait_for(lambda: platform.fake.photos, timeout=30)
    assert sent == [(int(person), url)]
