"""A model preset per schedule, over HTTP on a real store with two fake providers: a firing runs
on the schedule's preset (before CRAYFISH_MODEL_BACKGROUND); an unknown name is refused when
the schedule is added (REST and the model's tool); listings show it; a preset removed from
CRAYFISH_MODELS since falls back to the background model with a warning, never a failure."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from orchestrator.app import create_app

from tests.fakes import FakeLLM, Reply
from tests.postgres import fresh_database

from .conftest import make_settings

MODEL_NOT_FOUND = {"type": "invalid_request_error", "param": "model", "code": "model_not_found"}


@pytest.fixture
def backup() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        fake.reply_forever_text("from backup")
        yield fake


def app(tmp_path: Path, database: str, presets: list[dict[str, str]], **extra: Any) -> TestClient:
    """An orchestrator on `database` with these presets (the first the default)."""
    settings = make_settings(
        tmp_path,
        presets[0]["base_url"],
        1,
        CRAYFISH_DATABASE_URL=database,
        CRAYFISH_MODELS=json.dumps(presets),
        CRAYFISH_AUTO_RECALL="false",
        CRAYFISH_SCHEDULE_MIN_EVERY=0.1,
        **extra,
    )
    return TestClient(create_app(settings))


def preset(name: str, fake: FakeLLM, model: str) -> dict[str, str]:
    return {"name": name, "base_url": fake.base_url, "model": model}


def soon(seconds: float = 0.3) -> str:
    return datetime.fromtimestamp(time.time() + seconds, UTC).isoformat()


def asked(fake: FakeLLM, text: str) -> list[dict[str, Any]]:
    """The requests to `fake` whose last message carries `text`."""
    return [r for r in list(fake.requests) if text in str(r["messages"][-1]["content"])]


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.02)


def test_a_schedule_runs_on_the_preset_it_names(
    tmp_path: Path, fake_llm: FakeLLM, backup: FakeLLM
) -> None:
    fake_llm.reply_forever_text("from primary")
    presets = [preset("primary", fake_llm, "big-model"), preset("backup", backup, "small-model")]
    # The background model is primary: only the schedule's own choice sends a turn to backup.
    with app(
        tmp_path,
        fresh_database(),
        presets,
        CRAYFISH_MODEL_BACKGROUND="primary",
        CRAYFISH_SCHEDULE_POLL=0.05,
    ) as client:
        named = client.post(
            "/api/schedules", json={"message": "cheap check", "at": soon(), "model": "backup"}
        )
        assert named.status_code == 201, named.text
        assert named.json()["model"] == "backup"
        plain = client.post("/api/schedules", json={"message": "plain check", "at": soon()})
        assert plain.status_code == 201 and plain.json()["model"] is None
        listed = client.get("/api/schedules").json()["schedules"]
        assert {s["id"]: s["model"] for s in listed} == {
            named.json()["id"]: "backup",
            plain.json()["id"]: None,
        }
        wait_until(lambda: bool(asked(backup, "cheap check") and asked(fake_llm, "plain check")))
    assert [r["model"] for r in asked(backup, "cheap check")] == ["small-model"]
    assert asked(fake_llm, "cheap check") == []
    assert asked(backup, "plain check") == []


def test_an_unknown_preset_is_refused_and_the_models_tool_lists_its_choice(
    tmp_path: Path, fake_llm: FakeLLM, backup: FakeLLM
) -> None:
    presets = [preset("primary", fake_llm, "big-model"), preset("backup", backup, "small-model")]
    with app(tmp_path, fresh_database(), presets) as client:
        refused = client.post(
            "/api/schedules", json={"message": "x", "every": 3600, "model": "gpt-9"}
        )
        assert refused.status_code == 404, refused.text
        error = refused.json()["error"]
        assert {k: error[k] for k in MODEL_NOT_FOUND} == MODEL_NOT_FOUND
        assert "gpt-9" in error["message"] and "primary, backup" in error["message"]
        assert client.get("/api/schedules").json()["schedules"] == []

        fake_llm.reply_tool_calls(
            ("schedule_add", {"message": "y", "every": 3600, "model": "nope"})
        )
        fake_llm.reply_tool_calls(
            ("schedule_add", {"message": "z", "every": 3600, "model": "backup"})
        )
        fake_llm.reply_tool_calls(("schedule_list", {}))
        fake_llm.reply_text("done")
        accepted = client.post("/api/chat", json={"message": "schedule them", "session_id": "c"})
        assert accepted.status_code == 202, accepted.text
        task_id = accepted.json()["task_id"]
        wait_until(lambda: client.get(f"/api/tasks/{task_id}").json()["status"] == "completed")
        listed = client.get("/api/schedules").json()["schedules"]
    results = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert "`nope` does not exist" in results[0] and "primary, backup" in results[0]
    assert "Scheduled" in results[1]
    assert "'z'" in results[2] and "model backup" in results[2]
    assert [(s["message"], s["model"]) for s in listed] == [("z", "backup")]


def test_a_removed_preset_falls_back_to_the_background_model(
    tmp_path: Path,
    fake_llm: FakeLLM,
    backup: FakeLLM,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_llm.reply_forever_with(lambda body: Reply(text=f"served by {body['model']}"))
    database = fresh_database()
    before = [preset("primary", fake_llm, "big-model"), preset("backup", backup, "small-model")]
    # This replica looks for due schedules once, at its start: the schedule fires after.
    with app(tmp_path, database, before, CRAYFISH_SCHEDULE_POLL=3600) as client:
        made = client.post(
            "/api/schedules",
            json={"message": "nightly check", "at": soon(1.0), "model": "backup"},
        )
        assert made.status_code == 201, made.text
    # Restarted with `backup` gone from CRAYFISH_MODELS and a cheap background model.
    after = [preset("primary", fake_llm, "big-model"), preset("cheap", fake_llm, "cheap-model")]
    with (
        caplog.at_level(logging.WARNING, logger="orchestrator"),
        app(
            tmp_path,
            database,
            after,
            CRAYFISH_MODEL_BACKGROUND="cheap",
            CRAYFISH_SCHEDULE_POLL=0.05,
        ) as client,
    ):
        wait_until(lambda: bool(warnings(caplog)))
        (warned,) = warnings(caplog)
        task_id = warned.split()[1].rstrip(":")  # "turn <task id>: its schedule's model ..."
        assert made.json()["id"] in task_id

        def status() -> str:
            return str(client.get(f"/api/tasks/{task_id}").json()["status"])

        wait_until(lambda: status() not in ("queued", "running"))
        assert status() == "completed"
    assert [r["model"] for r in asked(fake_llm, "nightly check")] == ["cheap-model"]
    assert backup.requests == []


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "'backup' is no preset" in r.getMessage()]
