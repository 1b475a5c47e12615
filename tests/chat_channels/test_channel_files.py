"""Files in chats, with Telegram's fake and a model that sees images: a photo reaches the model
through the orchestrator's image path (stored, checked, sent as an image part)."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from tests.chat_channels.conformance import Start, _text_with
from tests.chat_channels.conftest import CHANNELS_TOKEN, OWNER_TOKEN
from tests.chat_channels.platform import new_person
from tests.chat_channels.telegram_platform import TelegramPlatform
from tests.fakes import FakeLLM
from tests.fakes.telegram_api import FakeTelegram
from tests.stacks import running_stack

# A valid 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.fixture(scope="module")
def stack_url(llm: FakeLLM) -> Iterator[str]:
    """The chat_channels stack, with a model that sees images."""
    env = {
        "CRAYFISH_API_TOKEN": OWNER_TOKEN,
        "CRAYFISH_CHANNELS_TOKEN": CHANNELS_TOKEN,
        "CRAYFISH_LLM_VISION": "on",
    }
    with running_stack(llm.base_url, env=env) as stack:
        yield stack.url


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
