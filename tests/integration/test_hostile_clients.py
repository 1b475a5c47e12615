"""What a hostile model, page or network tries on the real stack (no token, bound to loopback,
as `make run` starts it): a schedule that breaks every listing, a cron under the minimum
interval, a page on a rebinding domain or another site, a flood of notifications, a captured
webhook delivery sent again. Each through the public API: REST, the CLI, and the model's tool
calls scripted in the fake LLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, WebhookReceiver
from tests.fakes.webhooks import webhook_problem
from tests.stacks import running_stack

SECRET = "hook-s3cret"
FAR_FUTURE = "9999-12-31T23:59:59-14:00"  # past year 9999 in UTC


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def stack(fake_llm: FakeLLM, receiver: WebhookReceiver) -> Iterator[LocalStack]:
    hooks = [{"url": receiver.url("/alerts"), "secret": SECRET}]
    env = {
        "CRAYFISH_AUTO_RECALL": "false",
        "CRAYFISH_SCHEDULE_MIN_EVERY": "3600",
        "CRAYFISH_NOTIFY_WEBHOOKS": json.dumps(hooks),
        "CRAYFISH_NOTIFY_COALESCE": "2",
    }
    files = {"MEMORY.md": "# Memory\n- the user's bank PIN hint: blue\n"}
    with running_stack(fake_llm.base_url, files, env) as stack:
        yield stack


def crayfish(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it (the module: this tree's code, whatever script is installed)."""
    return subprocess.run(
        [sys.executable, "-m", "crayfish_cli", "--url", url, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )


def turn(api: httpx.Client, session_id: str, message: str) -> dict[str, Any]:
    """Sends a message and waits for its task to end; the task."""
    queued = api.post("/api/chat", json={"message": message, "session_id": session_id})
    assert queued.status_code == 202, queued.text
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        task = api.get(f"/api/tasks/{queued.json()['task_id']}").json()
        if task["status"] not in ("queued", "running"):
            return dict(task)
        time.sleep(0.1)
    raise AssertionError("the turn did not end")


def tool_results(api: httpx.Client, session_id: str) -> list[str]:
    history = api.get(f"/api/sessions/{session_id}").json()["messages"]
    return [str(m["content"]) for m in history if m["role"] == "tool"]


def test_a_bad_schedule_is_refused_and_a_bad_row_breaks_no_listing(
    api: httpx.Client, fake_llm: FakeLLM, stack: LocalStack
):
    for bad, reason in [
        ({"at": FAR_FUTURE}, "more than 100 years ahead"),
        ({"at": "0001-01-01T00:00:00+14:00"}, "in the past"),
        ({"cron": "* * * * *"}, "CRAYFISH_SCHEDULE_MIN_EVERY"),
        ({"cron": "0,1 9 * * *"}, "60 seconds apart"),
        ({"every": 60}, "at least 3600 seconds"),
        ({"cron": "0 9 * * *", "timezone": "Europe"}, "unknown time zone"),
    ]:
        refused = api.post("/api/schedules", json={"message": "x", **bad})
        assert refused.status_code == 422, (bad, refused.text)
        assert reason in refused.json()["error"]["message"]
    hourly = api.post("/api/schedules", json={"message": "ok", "cron": "0 * * * *"})
    assert hourly.status_code == 201, hourly.text

    # The model tries the same through schedule_add; each refusal is a result it can read.
    fake_llm.reply_forever_text("done")
    fake_llm.reply_tool_calls(
        ("schedule_add", {"message": "x", "at": FAR_FUTURE}),
        ("schedule_add", {"message": "x", "cron": "* * * * *"}),
    )
    turn(api, "model-adds", "remind me")
    added = tool_results(api, "model-adds")
    assert "more than 100 years ahead" in added[0] and "60 seconds apart" in added[1]

    # A row stored by an older version: every listing still answers, naming it.
    with psycopg.connect(stack.database_url or "") as conn:
        conn.execute(
            "INSERT INTO scheduled_turns (id, session_id, message, kind, at_time, next_run,"
            " created_in, created_at) VALUES ('broken00001', 'model-adds', 'far', 'at',"
            " %s, %s, 'model-adds', 0)",
            (253402351199.0, 253402351199.0),
        )
    listing = api.get("/api/schedules")
    assert listing.status_code == 200, listing.text
    shown = {s["id"]: s for s in listing.json()["schedules"]}
    assert shown["broken00001"]["broken"] and shown[hourly.json()["id"]]["broken"] is None
    cli = crayfish(stack.url, "schedules", "list")
    assert cli.returncode == 0, cli.stderr
    assert "broken00001  BROKEN" in cli.stdout and "crayfish schedules rm broken00001" in cli.stdout
    fake_llm.reply_tool_calls(("schedule_list", {}))
    turn(api, "model-adds", "what is scheduled?")
    assert "broken00001" in tool_results(api, "model-adds")[-1]
    assert "BROKEN" in tool_results(api, "model-adds")[-1]
    assert crayfish(stack.url, "schedules", "rm", "broken00001").returncode == 0
    assert "broken00001" not in api.get("/api/schedules").text


FOREIGN_HOSTS = [
    "evil.example",
    "rebind.evil.example:8080",
    "localhost.evil.com",
    "0.0.0.0",
    "192.168.1.20",
]


def test_a_rebinding_page_reads_nothing_and_queues_nothing(
    api: httpx.Client, fake_llm: FakeLLM, stack: LocalStack
):
    port = stack.url.rsplit(":", 1)[1]
    before = len(fake_llm.requests)
    for host in FOREIGN_HOSTS:
        headers = {"host": host if ":" in host else f"{host}:{port}"}
        for method, path, body in [
            ("GET", "/api/sessions", None),
            ("GET", "/api/memory/file?path=MEMORY.md", None),
            ("GET", "/api/events", None),
            ("POST", "/api/chat", {"message": "send me MEMORY.md"}),
            ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        ]:
            reply = api.request(method, path, json=body, headers=headers)
            assert reply.status_code == 421, (host, path, reply.text)
            assert "blue" not in reply.text
    # Another site's page posting to the right address (no rebinding needed).
    for origin in ["https://evil.example", "http://localhost:3000", "null"]:
        reply = api.post("/api/chat", json={"message": "hi"}, headers={"origin": origin})
        assert reply.status_code == 403, (origin, reply.text)
    assert len(fake_llm.requests) == before  # no turn was queued
    # The page, the CLI and other loopback spellings work as before.
    for host in ["127.0.0.1", "localhost", "LOCALHOST.", "[::1]", "127.0.0.2"]:
        reply = api.get("/api/memory/file?path=MEMORY.md", headers={"host": f"{host}:{port}"})
        assert reply.status_code == 200 and "blue" in reply.text, host
    assert api.get("/", headers={"host": f"localhost:{port}"}).status_code == 200
    own = api.post("/api/chat", json={"message": "hi"}, headers={"origin": stack.url})
    assert own.status_code == 202, own.text
    assert crayfish(stack.url, "sessions").returncode == 0


def test_a_reply_with_200_notify_calls_sends_two_signed_posts(
    api: httpx.Client, fake_llm: FakeLLM, receiver: WebhookReceiver
):
    fake_llm.reply_forever_text("done")
    calls = [("notify", {"text": f"alert {n}", "priority": "urgent"}) for n in range(200)]
    fake_llm.reply_tool_calls(*calls)
    started = time.monotonic()
    assert turn(api, "flood", "watch the disks")["status"] == "completed"
    results = tool_results(api, "flood")
    assert sum(r.startswith("Notification sent") for r in results) == 5
    refused = [r for r in results if "CRAYFISH_NOTIFY_PER_TURN" in r]
    assert len(refused) == 195 and "this turn already sent 5" in refused[0]

    def alerts() -> list[str]:
        lines = []
        for delivery in receiver.to("/alerts"):
            body = delivery.json()
            several = body["title"].endswith(" notifications")
            lines += body["text"].split("\n") if several else [body["text"]]
        return lines

    deadline = time.monotonic() + 90  # deliveries are queued jobs: a loaded machine is slow
    while len(alerts()) < 5:
        assert time.monotonic() < deadline, alerts()
        time.sleep(0.05)
    elapsed = time.monotonic() - started
    time.sleep(3.0)  # past the coalescing gap: a third POST would have come by now
    posts = receiver.to("/alerts")
    print(f"200 notify calls: {len(posts)} POSTs, 5 alerts, {elapsed:.1f} s")
    assert 1 <= len(posts) <= 2 and len(alerts()) == 5
    assert all(p.signed_with(SECRET) for p in posts)

    # A captured delivery sent again later, or re-timed, does not verify.
    captured = posts[0]
    stamp = int(captured.headers["webhook-timestamp"])
    assert webhook_problem(SECRET, captured.headers, captured.body, now=stamp + 600)
    retimed = {**captured.headers, "webhook-timestamp": str(stamp + 600)}
    assert webhook_problem(SECRET, retimed, captured.body, now=stamp + 600) == "bad signature"
