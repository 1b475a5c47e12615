"""What a chat is owed arrives without waiting for a drain: the channels service holds a long poll
on one orchestrator replica while the notification (or the schedule's turn) comes through
another; PostgreSQL's NOTIFY wakes the poll. The drain is set to an hour, so only the long poll
can have brought it. Telegram's fake."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from devstack.launcher import LocalStack
from tests.chat_channels.conformance import Start, _settled_all, _text_with
from tests.chat_channels.conftest import CHANNELS_TOKEN, OWNER_TOKEN
from tests.chat_channels.platform import new_person
from tests.chat_channels.telegram_platform import TelegramPlatform
from tests.fakes import FakeLLM, Reply
from tests.fakes.telegram_api import FakeTelegram
from tests.stacks import running_stack


@pytest.fixture(scope="module")
def stack(llm: FakeLLM) -> Iterator[LocalStack]:
    """Two orchestrator replicas on one database."""
    env = {"CRAYFISH_API_TOKEN": OWNER_TOKEN, "CRAYFISH_CHANNELS_TOKEN": CHANNELS_TOKEN}
    with running_stack(llm.base_url, env=env, orchestrators=2) as running:
        yield running


@pytest.fixture
def platform() -> Iterator[TelegramPlatform]:
    with FakeTelegram() as fake:
        yield TelegramPlatform(fake)


@pytest.fixture
def other_replica(stack: LocalStack) -> Iterator[httpx.Client]:
    """The owner's client of the replica the channels service is not talking to."""
    headers = {"Authorization": f"Bearer {OWNER_TOKEN}"}
    assert stack.urls[1] != stack.url  # the service is pointed at the first one
    with httpx.Client(base_url=stack.urls[1], headers=headers, timeout=30) as client:
        yield client


def started(platform: TelegramPlatform, start_service: Start, person: str) -> list[str]:
    """The service with no drain but the one at its start, and a chat that has begun."""
    env = {**platform.env(), "CHANNELS_TELEGRAM_ALLOW_FROM": person, "CHANNELS_DRAIN_EVERY": "3600"}
    start_service(env).ready()
    platform.say("/help", person)  # the bot may write to a chat once the person started it
    return _settled_all(platform, person, 1)


def test_a_notification_through_another_replica_reaches_the_chat_at_once(
    platform: TelegramPlatform, start_service: Start, other_replica: httpx.Client, llm: FakeLLM
) -> None:
    person = new_person()
    said = started(platform, start_service, person)
    note = {"text": "The build is broken.", "title": "CI", "target": f"telegram:{person}"}
    llm.reply_tool_calls(("notify", note))
    llm.reply_text("told them")
    accepted = other_replica.post("/api/chat", json={"message": "check the build"})
    assert accepted.status_code == 202, accepted.text
    shown = _text_with(platform, person, "The build is broken.", timeout=20)
    assert shown == "🔔 CI\n\nThe build is broken."
    time.sleep(1.5)  # a second copy would show by now
    assert platform.texts(person) == [*said, shown]


def test_a_schedules_answer_reaches_the_chat_without_a_drain(
    platform: TelegramPlatform, start_service: Start, other_replica: httpx.Client, llm: FakeLLM
) -> None:
    person = new_person()
    said = started(platform, start_service, person)
    soon = (datetime.now(UTC) + timedelta(seconds=2)).isoformat(timespec="seconds")
    schedule = {"message": "say it is time", "at": soon, "deliver_to": f"telegram:{person}"}
    made = other_replica.post("/api/schedules", json=schedule)
    assert made.status_code in (200, 201), made.text
    llm.reply_with(lambda body: Reply(text="It is time."))
    shown = _text_with(platform, person, "It is time.", timeout=20)
    assert _settled_all(platform, person, len(said) + 1) == [*said, shown]
