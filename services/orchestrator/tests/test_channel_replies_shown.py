"""Where a channel turn's answer went, shown where a person looks (the task, the turn in its
session), and the long poll that tells a channel at once what it owes, from any replica."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from orchestrator.app import create_app

from tests.fakes import FakeLLM

from .conftest import make_settings

OWNER = {"Authorization": "Bearer owner-token"}
CHANNEL = {"Authorization": "Bearer channel-token"}
TOKENS = {"CRAYFISH_API_TOKEN": "owner-token", "CRAYFISH_CHANNELS_TOKEN": "channel-token"}


@pytest.fixture
def replicas(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[tuple[TestClient, TestClient]]:
    """Two orchestrators on one database, as two replicas."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = make_settings(tmp_path / "a", fake_llm.base_url, 1, **TOKENS)
    second = make_settings(
        tmp_path / "b", fake_llm.base_url, 1, CRAYFISH_DATABASE_URL=first.database_url, **TOKENS
    )
    with TestClient(create_app(first)) as a, TestClient(create_app(second)) as b:
        yield a, b


def finished(client: TestClient, task_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        task: dict[str, Any] = client.get(f"/api/tasks/{task_id}", headers=OWNER).json()
        if task["status"] not in ("queued", "running"):
            return task
        time.sleep(0.05)
    raise AssertionError(f"task {task_id} did not finish")


def test_a_reply_that_failed_for_good_shows_on_the_task_and_on_its_turn(
    replicas: tuple[TestClient, TestClient], fake_llm: FakeLLM
) -> None:
    client, _ = replicas
    fake_llm.reply_text("first answer")
    fake_llm.reply_text("second answer")
    task_ids = []
    for number, text in enumerate(("hello there", "and again"), start=1):
        body = {"chat_id": "78", "message_id": str(number), "session_id": "telegram.78"}
        accepted = client.post(
            "/api/channels/telegram/turns", json={**body, "text": text}, headers=CHANNEL
        )
        assert accepted.status_code == 202, accepted.text
        task_ids.append(accepted.json()["task_id"])
        finished(client, task_ids[-1])
    first = finished(client, task_ids[0])
    assert first["channel_reply"]["status"] == "pending"
    assert (first["channel_reply"]["channel"], first["channel_reply"]["chat_id"]) == (
        "telegram",
        "78",
    )
    error = "Forbidden: bot was blocked by the user"
    for task_id, settled in zip(task_ids, ("delivered", "failed"), strict=True):
        path = f"/api/channels/telegram/replies/{task_id}"
        body = {"status": settled, "error": error if settled == "failed" else ""}
        assert client.post(path, json=body, headers=CHANNEL).status_code == 204
    failed = client.get(f"/api/tasks/{task_ids[1]}", headers=CHANNEL).json()["channel_reply"]
    assert failed["status"] == "failed" and failed["error"] == error and failed["settled_at"]
    session = client.get("/api/sessions/telegram.78", headers=OWNER).json()
    messages = session["messages"]
    placed = {r["task_id"]: r for r in session["channel_replies"]}
    assert messages[placed[task_ids[0]]["message_index"]]["content"] == "hello there"
    assert placed[task_ids[0]]["status"] == "delivered"
    assert messages[placed[task_ids[1]]["message_index"]]["content"] == "and again"
    assert placed[task_ids[1]]["error"] == error
    web_turn = client.post("/api/chat", json={"message": "hi"}, headers=OWNER).json()
    assert finished(client, web_turn["task_id"])["channel_reply"] is None


def test_a_long_poll_answers_when_another_replica_adds_a_message_owed(
    replicas: tuple[TestClient, TestClient], fake_llm: FakeLLM
) -> None:
    polled, notifying = replicas
    path = "/api/channels/telegram/owed"
    now = polled.get(path, headers=CHANNEL).json()
    assert now == {"replies": [], "messages": [], "cursor": 0}
    answers: list[dict[str, Any]] = []
    poll = threading.Thread(
        target=lambda: answers.append(
            polled.get(path, params={"after": 0, "wait": 30}, headers=CHANNEL).json()
        )
    )
    poll.start()
    time.sleep(0.5)
    assert poll.is_alive()  # nothing owed: the poll waits
    note = {"text": "The build is broken.", "target": "telegram:5"}
    fake_llm.reply_tool_calls(("notify", note))
    fake_llm.reply_text("told")
    accepted = notifying.post("/api/chat", json={"message": "tell them"}, headers=OWNER)
    assert finished(notifying, accepted.json()["task_id"])["status"] == "completed"
    poll.join(30)
    assert not poll.is_alive()
    [answer] = answers
    [message] = answer["messages"]
    assert message["chat_id"] == "5" and "The build is broken." in message["text"]
    assert answer["cursor"] == message["id"]
    # Owed already, nothing newer: the next poll waits; with the old cursor it answers at once.
    again = polled.get(path, params={"after": 0, "wait": 30}, headers=CHANNEL).json()
    assert again["messages"] == answer["messages"]
    quiet = polled.get(path, params={"after": answer["cursor"], "wait": 0.5}, headers=CHANNEL)
    assert quiet.json()["messages"] == answer["messages"]


def test_a_long_poll_refuses_a_wait_too_long_or_a_bad_cursor(
    replicas: tuple[TestClient, TestClient],
) -> None:
    client, _ = replicas
    for params in ({"wait": 61}, {"wait": -1}, {"after": -1}, {"after": "x"}):
        answer = client.get("/api/channels/telegram/owed", params=params, headers=CHANNEL)
        assert answer.status_code == 400, (params, answer.text)


async def test_a_message_owed_on_one_replica_wakes_the_waiters_of_another(
    core_factory: object,
) -> None:
    """The wake-up itself (not the waiter's slow look every few seconds, which sets nothing):
    one replica's insert is NOTIFYed to the other's listening connection."""
    waiting = await core_factory()  # type: ignore[operator]
    adding = await core_factory()  # type: ignore[operator]
    async with waiting.turns.events.woken_when_owed("telegram") as woken:
        async with waiting.turns.events.woken_when_owed("slack") as other_channel:
            await adding.channels.owe_message("telegram:5", "hello")
            await asyncio.wait_for(woken.wait(), 30)
            assert not other_channel.is_set()
