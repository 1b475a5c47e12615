"""Messages a chat gets without asking in that moment: a schedule made from the chat delivers its
answers there, and `notify` to a `channel:chat_id` target reaches the chat, durably (queued in
PostgreSQL while the channels service is down, sent once it is back). Telegram's fake."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.chat_channels.conformance import Start, _settled_all, _text_with
from tests.chat_channels.platform import new_person
from tests.chat_channels.telegram_platform import TelegramPlatform
from tests.fakes import FakeLLM, Reply
from tests.fakes.telegram_api import FakeTelegram


@pytest.fixture
def platform() -> Iterator[TelegramPlatform]:
    with FakeTelegram() as fake:
        yield TelegramPlatform(fake)


def settings(platform: TelegramPlatform, person: str) -> dict[str, str]:
    return {
        **platform.env(),
        "CHANNELS_TELEGRAM_ALLOW_FROM": person,
        "CHANNELS_DRAIN_EVERY": "0.5",
    }


def _tool_results(body: dict[str, object]) -> list[str]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [str(m["content"]) for m in messages if m["role"] == "tool"]


def test_a_schedule_made_in_a_chat_delivers_its_answer_there(
    platform: TelegramPlatform, start_service: Start, owner: httpx.Client, llm: FakeLLM
) -> None:
    person = new_person()
    start_service(settings(platform, person)).ready()
    soon = (datetime.now(UTC) + timedelta(seconds=3)).isoformat(timespec="seconds")
    llm.reply_tool_calls(("schedule_add", {"message": "remind me to stretch", "at": soon}))
    llm.reply_with(lambda body: Reply(text=f"Done: {_tool_results(body)[-1][:200]}"))
    llm.reply_text("Time to stretch!")
    platform.say("remind me to stretch in a moment", person)
    assert "Scheduled" in _text_with(platform, person, "Done:")
    schedules = owner.get("/api/schedules").json()["schedules"]
    mine = [s for s in schedules if s["message"] == "remind me to stretch"]
    assert mine and mine[0]["deliver_to"] == f"telegram:{person}"
    assert _text_with(platform, person, "Time to stretch!") == "Time to stretch!"
    assert len(llm.requests) == 3  # the scheduled turn ran once, and was answered once


def test_notify_to_a_chat_waits_for_the_channels_service_and_arrives_once(
    platform: TelegramPlatform, start_service: Start, owner: httpx.Client, llm: FakeLLM
) -> None:
    person = new_person()
    service = start_service(settings(platform, person))
    service.ready()
    platform.say("/help", person)  # the bot may write to a chat once the person started it
    said = _settled_all(platform, person, 1)
    service.stop()
    note = {"text": "The build is broken.", "title": "CI", "target": f"telegram:{person}"}
    llm.reply_tool_calls(("notify", note), ("notify", {"text": "x", "target": "no target"}))
    llm.reply_with(lambda body: Reply(text=json.dumps(_tool_results(body))))
    accepted = owner.post("/api/chat", json={"message": "check the build"})
    assert accepted.status_code == 202, accepted.text
    task = _finished(owner, accepted.json()["task_id"])
    results = json.loads(str(task["result"]))
    assert "not a `channel:chat_id` target" in results[1]  # the model reads why
    time.sleep(1.0)  # nothing runs the channel: the notification waits in PostgreSQL
    assert platform.texts(person) == said
    start_service(settings(platform, person)).ready()
    shown = _settled_all(platform, person, 2)
    assert shown == [*said, "🔔 CI\n\nThe build is broken."]
    time.sleep(1.5)  # three more drains: a second copy would show by now
    assert platform.texts(person) == shown


def _finished(owner: httpx.Client, task_id: str) -> dict[str, object]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        task: dict[str, object] = owner.get(f"/api/tasks/{task_id}").json()
        if task["status"] in ("completed", "failed"):
            assert task["status"] == "completed", task
            return task
        time.sleep(0.2)
    raise AssertionError(f"task {task_id} did not finish")
