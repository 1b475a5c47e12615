"""The workspace images a channel may read (GET /api/channels/{channel}/images): only one the
answer (or notification) it delivers shows, beneath the workspace, a regular image file within
the cap; every hostile file a sandboxed command could leave there is refused with a clear error."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from orchestrator.app import create_app

from tests.fakes import FakeLLM

from .conftest import make_settings

OWNER = {"Authorization": "Bearer owner-token"}
CHANNEL = {"Authorization": "Bearer channel-token"}
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 60
MAX_BYTES = 10_000
IMAGES = "/api/channels/telegram/images"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "workspace"


@pytest.fixture
def client(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[TestClient]:
    settings = make_settings(
        tmp_path,
        fake_llm.base_url,
        1,
        CRAYFISH_API_TOKEN="owner-token",
        CRAYFISH_CHANNELS_TOKEN="channel-token",
        CRAYFISH_IMAGE_MAX_BYTES=MAX_BYTES,
    )
    with TestClient(create_app(settings)) as client:
        yield client


def finished(client: TestClient, task_id: str) -> dict[str, object]:
    deadline = time.monotonic() + 30
    while True:
        task: dict[str, object] = client.get(f"/api/tasks/{task_id}", headers=OWNER).json()
        if task["status"] not in ("queued", "running"):
            return task
        assert time.monotonic() < deadline, task
        time.sleep(0.05)


def channel_turn(client: TestClient, chat: str = "78", channel: str = "telegram") -> str:
    body = {"chat_id": chat, "message_id": f"m{time.monotonic_ns()}", "text": "a chart?"}
    accepted = client.post(
        f"/api/channels/{channel}/turns",
        json={**body, "session_id": f"{channel}.{chat}"},
        headers=CHANNEL,
    )
    assert accepted.status_code == 202, accepted.text
    task_id = str(accepted.json()["task_id"])
    assert finished(client, task_id)["status"] == "completed"
    return task_id


def image(client: TestClient, path: str, **which: object) -> tuple[int, str, bytes]:
    answer = client.get(IMAGES, params={"path": path, **which}, headers=CHANNEL)
    return answer.status_code, answer.headers["content-type"], answer.content


def test_an_image_the_answer_shows_is_served_as_what_its_bytes_are(
    client: TestClient, fake_llm: FakeLLM, workspace: Path
) -> None:
    (workspace / "charts").mkdir()
    (workspace / "charts" / "c.png").write_bytes(PNG)
    (workspace / "charts" / "photo.webp").write_bytes(JPEG)  # the name says WebP: it is a JPEG
    ways = [
        "charts/c.png",
        "./charts/c.png",
        "/workspace/charts/c.png",
        f"{workspace}/charts/c.png",
    ]
    answer = "Here:\n\n" + "\n".join(f"![chart]({way})" for way in ways)
    fake_llm.reply_text(answer + "\n![a photo](<charts/photo.webp>)")
    task_id = channel_turn(client)
    for way in ways:
        assert image(client, way, task_id=task_id) == (200, "image/png", PNG), way
    assert image(client, "charts/photo.webp", task_id=task_id) == (200, "image/jpeg", JPEG)
    # Delivered: the answer is the chat's now, its images too.
    settle = {"status": "delivered"}
    path = f"/api/channels/telegram/replies/{task_id}"
    assert client.post(path, json=settle, headers=CHANNEL).status_code == 204
    assert image(client, "charts/c.png", task_id=task_id)[0] == 200


def test_what_a_sandboxed_command_could_leave_at_the_path_is_refused(
    client: TestClient, fake_llm: FakeLLM, workspace: Path
) -> None:
    (workspace / "charts").mkdir()
    (workspace / "charts" / "passwd.png").symlink_to("/etc/passwd")
    os.mkfifo(workspace / "charts" / "fifo.png")
    (workspace / "charts" / "huge.png").write_bytes(PNG + b"\x00" * MAX_BYTES)
    (workspace / "charts" / "text.png").write_text("not an image at all")
    (workspace / "charts" / "ok.png").write_bytes(PNG)
    os.link(workspace / "charts" / "ok.png", workspace / "charts" / "hardlink.png")
    (workspace.parent / "outside.png").write_bytes(PNG)
    refused = {
        "charts/passwd.png": (422, "image_refused"),
        "charts/fifo.png": (422, "image_refused"),
        "charts/hardlink.png": (422, "image_refused"),
        "../outside.png": (422, "image_refused"),
        "/etc/passwd": (422, "image_refused"),
        "charts/huge.png": (413, "image_too_large"),
        "charts/text.png": (415, "not_an_image"),
        "charts/gone.png": (404, "image_not_found"),
    }
    fake_llm.reply_text("\n".join(f"![x]({path})" for path in refused))
    task_id = channel_turn(client)
    for path, (status, code) in refused.items():
        answer = client.get(IMAGES, params={"path": path, "task_id": task_id}, headers=CHANNEL)
        assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), path
        assert answer.headers["content-type"] == "application/json"
    # A file the answer does not show, though it is a fine image, is not served either.
    assert image(client, "charts/ok.png", task_id=task_id)[0] == 404


def test_only_the_channel_owing_the_answer_reads_its_images(
    client: TestClient, fake_llm: FakeLLM, workspace: Path
) -> None:
    (workspace / "c.png").write_bytes(PNG)
    fake_llm.reply_forever_text("![c](c.png)")
    slack_task = channel_turn(client, channel="slack")
    assert image(client, "c.png", task_id=slack_task)[0] == 404  # telegram asks for slack's
    owners = client.post("/api/chat", json={"message": "a chart?"}, headers=OWNER)
    owner_task = owners.json()["task_id"]
    assert finished(client, owner_task)["result"] == "![c](c.png)"
    assert image(client, "c.png", task_id=owner_task)[0] == 404  # no channel turn at all
    task_id = channel_turn(client)
    path = f"/api/channels/telegram/replies/{task_id}"
    failed = {"status": "failed", "error": "blocked"}
    assert client.post(path, json=failed, headers=CHANNEL).status_code == 204
    assert image(client, "c.png", task_id=task_id)[0] == 404  # given up: nothing more sent


def test_a_notification_to_a_chat_shows_its_images_too(
    client: TestClient, fake_llm: FakeLLM, workspace: Path
) -> None:
    (workspace / "c.png").write_bytes(PNG)
    arguments = {"text": "Done: ![the chart](c.png)", "title": "Report"}
    fake_llm.reply_tool_calls(("notify", json.dumps(arguments)))
    fake_llm.reply_text("Sent.")
    channel_turn(client)
    messages = client.get("/api/channels/telegram/messages", headers=CHANNEL).json()["messages"]
    assert [m["chat_id"] for m in messages] == ["78"] and "c.png" in messages[0]["text"]
    number = messages[0]["id"]
    assert image(client, "c.png", message_id=number) == (200, "image/png", PNG)
    assert image(client, "other.png", message_id=number)[0] == 404
    assert image(client, "c.png", message_id=number + 1)[0] == 404
    both = client.get(
        IMAGES, params={"path": "c.png", "message_id": number, "task_id": "x"}, headers=CHANNEL
    )
    assert both.status_code == 400


def test_a_chat_turn_tells_the_model_where_it_answers_and_how_to_show_an_image(
    client: TestClient, fake_llm: FakeLLM
) -> None:
    fake_llm.reply_forever_text("ok")
    channel_turn(client, channel="slack")
    owners = client.post("/api/chat", json={"message": "a chart?"}, headers=OWNER)
    finished(client, owners.json()["task_id"])
    chat, own = (str(request["messages"][-1]["content"]) for request in fake_llm.requests)
    assert "answering in a slack chat" in chat and "![description](path/in/workspace.png)" in chat
    assert "chat" not in own.replace("a chart?", "")  # the owner's own turn gets no such line
