"""A secret from CRAYFISH_SECRETS_FILE across the whole stack: the skill that needs it becomes
available, its command gets it, and the value is found nowhere the model, a log, REST or the
store could show it."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from devstack.launcher import LocalStack
from tests.conftest import DEFAULT_FILES
from tests.fakes import FakeLLM, Reply
from tests.integration.test_chat_turn import last_tool_output
from tests.stacks import print_figures, running_stack, wait_task

TOKEN = "ghp_StackSecret0123456789abcdefABCDEF"
GITHUB_SKILL = """---
name: github
description: Use the GitHub API with the user's token.
metadata: {"openclaw": {"requires": {"env": ["GITHUB_TOKEN"]}, "primaryEnv": "GITHUB_TOKEN"}}
---
Run commands with the token in GITHUB_TOKEN.
"""
# Prints the value, its base64 and its sha256 (the proof that the command had it).
COMMAND = (
    'echo "token: $GITHUB_TOKEN"; printf %s "$GITHUB_TOKEN" | base64; '
    'printf %s "$GITHUB_TOKEN" | sha256sum'
)


@pytest.fixture(scope="module")
def secrets_file() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="crayfish-secrets-"))
    path = folder / "secrets.env"
    path.write_text(f"# for the github skill\nGITHUB_TOKEN[github]={TOKEN}\n")
    path.chmod(0o600)
    yield path
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def stack(fake_llm: FakeLLM, secrets_file: Path) -> Iterator[LocalStack]:
    files = {**DEFAULT_FILES, "skills/github/SKILL.md": GITHUB_SKILL}
    env = {
        "CRAYFISH_SECRETS_FILE": str(secrets_file),
        "SKILLS_BINS_CACHE_SECONDS": "1",
        # Written beside the secrets file's folder, removed with it.
        "CRAYFISH_TRANSCRIPTS_DIR": str(secrets_file.parent / "transcripts"),
    }
    # Every service logs all it can: the logs searched below are as full as they get.
    for prefix in ("CRAYFISH", "TOOL_RUNNER", "SKILLS", "MEMORY", "CONNECTORS"):
        env[f"{prefix}_LOG_LEVEL"] = "DEBUG"
    with running_stack(fake_llm.base_url, files, env) as stack:
        yield stack


def test_a_skills_secret_works_and_is_found_nowhere(
    api: httpx.Client, fake_llm: FakeLLM, stack: LocalStack, request: pytest.FixtureRequest
):
    github = skill_once_gated(api, "github")
    assert github["available"] and github["missing"] == [], github
    fake_llm.reply_tool_calls(("read_skill", {"name": "github"}))
    fake_llm.reply_tool_calls(("exec", {"command": COMMAND, "skill": "github"}))
    fake_llm.reply_with(lambda body: Reply(text=last_tool_output(body)))
    accepted = api.post("/api/chat", json={"message": "check my token", "session_id": "gh"})
    task = wait_task(api, accepted.json()["task_id"])
    assert task["status"] == "completed", task

    seen = last_tool_output(fake_llm.requests[2])
    assert hashlib.sha256(TOKEN.encode()).hexdigest() in seen  # the command had the value
    assert "token: [secret GITHUB_TOKEN]" in seen  # what the model got instead of it
    assert seen.count("[secret GITHUB_TOKEN]") == 2  # the base64 line too
    assert 'exec\'s "skill": "github"' in last_tool_output(fake_llm.requests[1])

    places = searched_places(api, fake_llm, stack, accepted.json()["task_id"])
    forms = (TOKEN, base64.b64encode(TOKEN.encode()).decode().rstrip("="))
    found = {place: sum(text.count(f) for f in forms) for place, text in places.items()}
    print_figures(
        request,
        [
            f"secret value (or its base64) searched in {len(places)} places: "
            f"{sum(found.values())} found"
        ]
        + [f"  {place}: {len(text)} chars, found {found[place]}" for place, text in places.items()],
    )
    assert sum(found.values()) == 0, {place: n for place, n in found.items() if n}


def skill_once_gated(api: httpx.Client, name: str, timeout: float = 20) -> dict[str, Any]:
    """The skill once it is available (the skills service may start before the tool-runner
    answers, and then asks again), or as it is at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        skill = {s["name"]: s for s in api.get("/api/skills").json()["skills"]}[name]
        if skill["available"] or time.monotonic() > deadline:
            return dict(skill)
        time.sleep(0.2)


def searched_places(
    api: httpx.Client, fake_llm: FakeLLM, stack: LocalStack, task_id: str
) -> dict[str, str]:
    """Everything the value could have leaked to, as text by place."""
    places = {"every fake-LLM request": json.dumps(fake_llm.requests, ensure_ascii=False)}
    assert stack.log_dir is not None
    for log in sorted(stack.log_dir.rglob("*")):
        if log.is_file():
            places[f"log {log.name}"] = log.read_text(errors="replace")
    for path in (
        f"/api/tasks/{task_id}",
        "/api/sessions/gh",
        "/api/sessions",
        "/api/skills",
        "/api/tools",
        "/metrics",
    ):
        places[f"REST {path}"] = api.get(path).text
    with api.stream("GET", f"/api/tasks/{task_id}/events") as events:
        places[f"REST /api/tasks/{task_id}/events"] = "".join(events.iter_text())
    places["PostgreSQL, every row of every table"] = database_text(stack.database_url or "")
    # Transcripts, the services' data folders (but PostgreSQL's files: searched above) and the
    # workspace: every file, as bytes.
    transcripts = Path(stack.extra_env["CRAYFISH_TRANSCRIPTS_DIR"])
    for folder in (transcripts, stack.data_dir, stack.workspace):
        files = [f for f in folder.rglob("*") if f.is_file() and "postgres" not in f.parts]
        text = "".join(f.read_bytes().decode("utf-8", "replace") for f in files)
        places[f"{len(files)} files under {folder.name}/"] = text
    assert any(transcripts.rglob("*.jsonl")), "the turn should have a transcript"
    return places


def database_text(url: str) -> str:
    """Every row of every table of the orchestrators' database, as text."""
    rows: list[Any] = []
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) "
            "FROM information_schema.tables WHERE table_schema NOT IN "
            "('pg_catalog', 'information_schema')"
        ).fetchall()
        for (table,) in tables:
            rows += conn.execute(f"SELECT t::text FROM {table} t").fetchall()
    assert len(rows) > 10, "the store should hold the turn"
    return "\n".join(str(row[0]) for row in rows)
