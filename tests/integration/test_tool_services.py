"""A custom tool service added by configuration: the db_query example (examples/db-query-tool)
as its own process beside the whole stack, named `db` in CRAYFISH_TOOL_SERVICES."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from crayfish_common.healthcheck import check

from devstack.launcher import LocalStack, free_port
from tests.fakes import FakeLLM, Reply
from tests.stacks import wait_task

DB_PORT = free_port()
DB_ADDRESS = f"127.0.0.1:{DB_PORT}"
STACK_ENV = {"CRAYFISH_TOOL_SERVICES": f"db={DB_ADDRESS}"}


def tool_outputs(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def quote_tools(body: dict[str, Any]) -> Reply:
    return Reply(text="\n---\n".join(tool_outputs(body)))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def chat(api: httpx.Client, message: str) -> dict[str, Any]:
    accepted = api.post("/api/chat", json={"message": message})
    assert accepted.status_code == 202, accepted.text
    return wait_task(api, accepted.json()["task_id"])


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("db-query") / "monitoring.db"


@pytest.fixture(scope="module", autouse=True)
def db_service(database: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The example service on DB_PORT over a small monitoring database, started before the stack."""
    with sqlite3.connect(database) as connection:
        connection.executescript(
            "CREATE TABLE hosts (name TEXT, datacenter TEXT, cpu REAL);"
            "INSERT INTO hosts VALUES ('web-1', 'fra', 71.5), ('web-2', 'fra', 12.0),"
            " ('db-1', 'ams', 93.25);"
        )
    connection.close()
    env = {**os.environ, "DB_QUERY_DATABASE": str(database), "DB_QUERY_PORT": str(DB_PORT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "db_query_tool"], env=env, start_new_session=True
    )
    deadline = time.monotonic() + 30
    while not check(DB_ADDRESS, timeout=0.5):
        assert process.poll() is None, "the db_query service exited at start-up"
        assert time.monotonic() < deadline, "the db_query service did not become healthy"
        time.sleep(0.1)
    yield process
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def test_the_model_calls_db_query_and_reads_the_rows(api: httpx.Client, fake_llm: FakeLLM):
    seen = len(fake_llm.requests)
    sql = "SELECT name, cpu FROM hosts WHERE datacenter = ? ORDER BY cpu DESC"
    fake_llm.reply_tool_calls(("db_query", {"sql": sql, "params": ["fra"]}))
    fake_llm.reply_with(quote_tools)
    task = chat(api, "which hosts in fra are busiest?")
    assert task["status"] == "completed", task
    first, second = fake_llm.requests[seen:]
    offered = [t["function"]["name"] for t in first["tools"]]
    assert "db_query" in offered and "exec" in offered
    assert tool_outputs(second) == [
        'columns: ["name", "cpu"]\n["web-1", 71.5]\n["web-2", 12.0]\n(2 rows)'
    ]
    system = first["messages"][0]["content"]
    assert "- db_query: Run one read-only SQL SELECT" in system


def test_api_tools_lists_every_tool_with_its_service(api: httpx.Client, stack: LocalStack):
    listed = api.get("/api/tools")
    assert listed.status_code == 200, listed.text
    body = listed.json()
    services = {t["name"]: t["service"] for t in body["tools"]}
    assert services["db_query"] == "db"
    assert services["exec"] == "tool-runner" and services["memory_search"] == "memory"
    assert body["unavailable"] == {} and body["searching"] is False
    # No search provider in this stack: web_search is held back, and the reason is shown.
    assert "web_search" not in services
    assert body["not_offered"]["web_search"].startswith("web_search is not configured")
    db_query = next(t for t in body["tools"] if t["name"] == "db_query")
    assert db_query["description"].startswith("Run one read-only SQL SELECT")
    cli = subprocess.run(
        [sys.executable, "-m", "crayfish_cli", "tools"],
        env={**os.environ, "CRAYFISH_URL": stack.url, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 0, cli.stderr
    assert any(line.startswith("db_query [db]  Run one") for line in cli.stdout.splitlines())
    assert "web_search: not offered (web_search is not configured" in cli.stderr


def test_readyz_lists_the_custom_service(api: httpx.Client):
    ready = api.get("/readyz")
    assert ready.status_code == 200, ready.text
    db = next(d for d in ready.json()["dependencies"] if d["name"] == "db")
    assert db == {"name": "db", "address": DB_ADDRESS, "ok": True, "detail": "SERVING"}


def test_write_attempts_are_refused_and_change_nothing(
    api: httpx.Client, fake_llm: FakeLLM, database: Path
):
    seen = len(fake_llm.requests)
    before = digest(database)
    attempts = [
        "DELETE FROM hosts",
        f"ATTACH DATABASE '{database.parent / 'copy.db'}' AS copy",
        "PRAGMA journal_mode = WAL",
        "UPDATE hosts SET cpu = 0",
    ]
    fake_llm.reply_tool_calls(*(("db_query", {"sql": sql}) for sql in attempts))
    fake_llm.reply_tool_calls(("db_query", {"sql": "SELECT count(*) FROM hosts"}))
    fake_llm.reply_with(quote_tools)
    task = chat(api, "clean up the hosts table")
    assert task["status"] == "completed", task
    _, after_refusals, after_count = fake_llm.requests[seen:]
    refusals = tool_outputs(after_refusals)
    assert len(refusals) == len(attempts)
    for needs, output in zip(["DELETE", "ATTACH", "PRAGMA", "UPDATE"], refusals, strict=True):
        assert "only reads (SELECT)" in output and needs in output, output
    assert tool_outputs(after_count)[-1].startswith('columns: ["count(*)"]\n[3]')
    assert digest(database) == before
    assert not (database.parent / "copy.db").exists()


def test_a_dead_tool_service_fails_readiness_and_the_other_tools_keep_working(
    api: httpx.Client, fake_llm: FakeLLM, db_service: subprocess.Popen[bytes]
):
    seen = len(fake_llm.requests)
    os.killpg(db_service.pid, signal.SIGKILL)
    db_service.wait()
    ready = api.get("/readyz")
    assert ready.status_code == 503
    db = next(d for d in ready.json()["dependencies"] if d["name"] == "db")
    assert db["ok"] is False and db["detail"].startswith("UNAVAILABLE")
    fake_llm.reply_tool_calls(
        ("exec", {"command": "echo still-$((40+2))"}),
        ("db_query", {"sql": "SELECT 1"}),
    )
    fake_llm.reply_with(quote_tools)
    task = chat(api, "run both")
    assert task["status"] == "completed", task
    exec_output, db_output = tool_outputs(fake_llm.requests[seen + 1])
    assert "still-42" in exec_output
    assert db_output.startswith("Error:") and "db" in db_output
    deadline = time.monotonic() + 15  # the tool list is re-read within its 5 s lifetime
    while "db" not in (body := api.get("/api/tools").json())["unavailable"]:
        assert time.monotonic() < deadline, body
        time.sleep(0.2)
    assert "db_query" not in {t["name"] for t in body["tools"]}
    assert body["unavailable"]["db"].startswith("UNAVAILABLE")
    assert json.dumps(body).count('"exec"') == 1
