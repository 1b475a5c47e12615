"""Choosing a model preset over HTTP, on a real store, with two fake providers: per session
(PATCH /api/sessions/{id}), per request (/api/chat and /v1 `model`), background turns
(CRAYFISH_MODEL_BACKGROUND); /v1/models lists the presets; unknown names are 404
`model_not_found` in OpenAI's shape."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from orchestrator.app import create_app

from tests.fakes import FakeLLM

from .conftest import make_settings

MODEL_NOT_FOUND = {"type": "invalid_request_error", "param": "model", "code": "model_not_found"}


@pytest.fixture
def backup() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        fake.reply_forever_text("from backup")
        yield fake


@pytest.fixture
def client(tmp_path: Path, fake_llm: FakeLLM, backup: FakeLLM) -> Iterator[TestClient]:
    fake_llm.reply_forever_text("from primary")
    presets = [
        {"name": "primary", "base_url": fake_llm.base_url, "model": "big-model"},
        {"name": "backup", "base_url": backup.base_url, "model": "small-model"},
    ]
    settings = make_settings(
        tmp_path,
        fake_llm.base_url,
        1,
        CRAYFISH_MODELS=json.dumps(presets),
        CRAYFISH_MODEL_BACKGROUND="backup",
        CRAYFISH_AUTO_RECALL="false",
    )
    with TestClient(create_app(settings)) as client:
        yield client


def turn(client: TestClient, message: str, **extra: Any) -> dict[str, Any]:
    """Sends a message and waits for its task's end."""
    accepted = client.post("/api/chat", json={"message": message, **extra})
    assert accepted.status_code == 202, accepted.text
    task_id = accepted.json()["task_id"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        task = client.get(f"/api/tasks/{task_id}").json()
        if task["status"] not in ("queued", "running"):
            return task
        time.sleep(0.02)
    raise AssertionError(f"task {task_id} did not end")


def test_a_session_keeps_the_model_chosen_for_it(client: TestClient, backup: FakeLLM):
    first = turn(client, "hello")
    session = first["session_id"]
    assert first["result"] == "from primary"
    changed = client.patch(f"/api/sessions/{session}", json={"model": "backup"})
    assert changed.status_code == 200 and changed.json() == {"id": session, "model": "backup"}
    assert client.get(f"/api/sessions/{session}").json()["model"] == "backup"
    assert turn(client, "and now?", session_id=session)["result"] == "from backup"
    assert backup.last_request["model"] == "small-model"
    assert turn(client, "still?", session_id=session)["result"] == "from backup"
    # Another session keeps the default.
    assert turn(client, "elsewhere")["result"] == "from primary"
    client.patch(f"/api/sessions/{session}", json={"model": None})
    assert turn(client, "back?", session_id=session)["result"] == "from primary"


def test_a_request_may_ask_another_model_for_its_turn_alone(client: TestClient):
    session = turn(client, "hello")["session_id"]
    asked = turn(client, "quick one", session_id=session, model="backup")
    assert asked["result"] == "from backup"
    assert turn(client, "and again", session_id=session)["result"] == "from primary"


def test_unknown_models_are_404_model_not_found(client: TestClient):
    session = turn(client, "hello")["session_id"]
    for reply in (
        client.patch(f"/api/sessions/{session}", json={"model": "gpt-9"}),
        client.post("/api/chat", json={"message": "hi", "model": "gpt-9"}),
        client.post(
            "/v1/chat/completions",
            json={"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]},
        ),
    ):
        assert reply.status_code == 404, reply.text
        error = reply.json()["error"]
        assert {k: error[k] for k in MODEL_NOT_FOUND} == MODEL_NOT_FOUND
        assert "gpt-9" in error["message"] and "primary, backup" in error["message"]
    # Nothing changed, nothing queued.
    assert client.get(f"/api/sessions/{session}").json()["model"] is None
    assert len(client.get("/api/sessions").json()["sessions"]) == 1
    unknown = client.patch("/api/sessions/nobody", json={"model": "backup"})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "session_not_found"


def test_v1_takes_a_preset_the_agents_name_or_the_defaults_own_model(client: TestClient):
    def answer(model: str) -> str:
        body = {"model": model, "messages": [{"role": "user", "content": f"hi {model}"}]}
        reply = client.post("/v1/chat/completions", json=body)
        assert reply.status_code == 200, reply.text
        return str(reply.json()["choices"][0]["message"]["content"])

    assert answer("backup") == "from backup"
    assert answer("crayfish") == "from primary"
    assert answer("big-model") == "from primary"  # the default preset's own model
    assert answer("fake-model") == "from primary"  # CRAYFISH_MODEL, which make_settings sets
    listed = client.get("/v1/models").json()["data"]
    assert [m["id"] for m in listed] == ["crayfish", "primary", "backup"]
    assert listed[1]["crayfish"] == {
        "model": "big-model",
        "default": True,
        "fallback": False,
        "background": False,
    }
    assert listed[2]["crayfish"]["background"] is True


def test_heartbeats_run_on_the_background_model(
    client: TestClient, tmp_path: Path, backup: FakeLLM
):
    (tmp_path / "workspace" / "HEARTBEAT.md").write_text("- [ ] check the backups\n")
    fired = client.post("/api/heartbeat")
    assert fired.status_code == 200, fired.text
    task_id = fired.json()["task_id"]
    deadline = time.monotonic() + 20
    while client.get(f"/api/tasks/{task_id}").json()["status"] in ("queued", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert client.get(f"/api/tasks/{task_id}").json()["status"] == "completed"
    assert len(backup.requests) == 1 and backup.last_request["model"] == "small-model"
