"""Seed 001's monitoring example on the real stack (two orchestrators, the sandbox, a loopback
webhook receiver, the scripted LLM): a schedule whose turn runs a check in the sandbox and
notifies only when it fails; schedules survive a restart of every orchestrator and fire once
per due time with two of them."""

from __future__ import annotations

import itertools
import json
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, Reply, WebhookReceiver
from tests.stacks import running_stack, wait_task

SECRET = "monitor-s3cret"
CHECK = "test -f watched.flag && echo CHECK-OK || echo CHECK-FAILED"
DUE = re.compile(r"\[Scheduled task (\w+), due ([^\]]+)\]")
PROBE = "probe: anything before me in this session has run"


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def stack(fake_llm: FakeLLM, receiver: WebhookReceiver) -> Iterator[LocalStack]:
    env = {
        "CRAYFISH_AUTO_RECALL": "false",
        "CRAYFISH_SCHEDULE_POLL": "0.2",
        "CRAYFISH_SCHEDULE_MIN_EVERY": "1",
        "CRAYFISH_NOTIFY_WEBHOOKS": json.dumps(
            [{"url": receiver.url("/alerts"), "secret": SECRET}]
        ),
        "CRAYFISH_NOTIFY_BACKOFF": "0.2",
    }
    with running_stack(
        fake_llm.base_url, {"watched.flag": "present\n"}, env, orchestrators=2
    ) as stack:
        yield stack


@pytest.fixture
def api(stack: LocalStack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.url, timeout=30) as client:
        yield client


class Monitor:
    """The model's side of the example: run the check; notify only when it failed."""

    def __init__(self, fake: FakeLLM):
        self.fake = fake
        self.firings: list[str] = []  # "<schedule id> <due>" of each turn's first request
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "user" and PROBE in str(last["content"]):
            return Reply(text="probed")  # the user's own turn, not a firing
        if last["role"] == "user":
            found = DUE.search(str(last["content"]))
            with self.lock:
                self.firings.append(" ".join(found.groups()) if found else "?")
            return Reply(tool_calls=[self.fake.tool_call("exec", {"command": CHECK})])
        if last["role"] == "tool" and "CHECK-FAILED" in last["content"]:
            alert = {"text": "watched.flag is missing", "title": "monitor", "priority": "high"}
            return Reply(tool_calls=[self.fake.tool_call("notify", alert)])
        if last["role"] == "tool" and "CHECK-OK" in last["content"]:
            return Reply(text="HEARTBEAT_OK")
        return Reply(text="I alerted the user: watched.flag is missing.")


def soon(seconds: float = 1.0) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


def wait_until(condition: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.1)
    return value


def finished_turn(api: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    """The session's history once its scheduled turn has its final answer."""

    def answered() -> list[dict[str, Any]] | None:
        reply = api.get(f"/api/sessions/{session_id}")
        if reply.status_code != 200:
            return None
        history = reply.json()["messages"]
        last = history[-1] if history else {}
        done = last.get("role") == "assistant" and not last.get("tool_calls")
        return history if done else None

    return wait_until(answered)


def test_a_scheduled_check_notifies_only_when_it_fails(
    api: httpx.Client, fake_llm: FakeLLM, receiver: WebhookReceiver, stack: LocalStack
):
    fake_llm.reply_forever_with(Monitor(fake_llm))
    passing = api.post("/api/schedules", json={"message": "check watched.flag", "at": soon()})
    assert passing.status_code == 201, passing.text
    history = finished_turn(api, passing.json()["session_id"])
    assert "CHECK-OK" in history[2]["content"] and history[-1]["content"] == "HEARTBEAT_OK"
    assert receiver.to("/alerts") == []

    (stack.workspace / "watched.flag").unlink()
    failing = api.post("/api/schedules", json={"message": "check watched.flag", "at": soon()})
    history = finished_turn(api, failing.json()["session_id"])
    assert "CHECK-FAILED" in history[2]["content"]
    assert [c["function"]["name"] for c in history[3]["tool_calls"]] == ["notify"]
    (alert,) = receiver.wait_for("/alerts", 1)
    assert alert.signed_with(SECRET)
    assert alert.json() == {
        "text": "watched.flag is missing",
        "title": "monitor",
        "priority": "high",
        "session_id": failing.json()["session_id"],
    }
    # A later alert: the queue hands out its oldest job first, so a second sending of the first
    # alert, queued before this one, would have come by the time this one has.
    again = api.post("/api/schedules", json={"message": "check watched.flag", "at": soon()})
    finished_turn(api, again.json()["session_id"])
    receiver.wait_for("/alerts", 2)
    alerted = [alert.json()["session_id"] for alert in receiver.to("/alerts")]
    assert alerted == [failing.json()["session_id"], again.json()["session_id"]]
    shown = notification_event(api)  # what the web page shows
    assert shown["notification"]["text"] == "watched.flag is missing"
    assert shown["task_id"].startswith(f"sched-{failing.json()['id']}-")
    (stack.workspace / "watched.flag").write_text("present\n")


def notification_event(api: httpx.Client) -> dict[str, Any]:
    """The first `notification` event of the global stream."""
    with api.stream("GET", "/api/events") as events:
        for line in events.iter_lines():
            if line.startswith("data: ") and '"notification"' in line:
                body = json.loads(line.removeprefix("data: "))
                if body["type"] == "notification":
                    return dict(body)
    raise AssertionError("the stream ended without a notification")


def schedule_of(api: httpx.Client, schedule_id: str) -> dict[str, Any]:
    listed = api.get("/api/schedules").json()["schedules"]
    return next(s for s in listed if s["id"] == schedule_id)


def runs_of(api: httpx.Client, schedule_id: str) -> int:
    return int(schedule_of(api, schedule_id)["runs"])


def test_schedules_fire_once_per_due_time_with_two_orchestrators_and_across_a_restart(
    api: httpx.Client, fake_llm: FakeLLM, stack: LocalStack
):
    monitor = Monitor(fake_llm)
    fake_llm.reply_forever_with(monitor)
    made = api.post("/api/schedules", json={"message": "check watched.flag", "every": 1}).json()
    wait_until(lambda: runs_of(api, made["id"]) >= 4)

    # Every orchestrator stops; while none runs, nothing fires; then both start again.
    due = schedule_of(api, made["id"])["next_run_ts"]
    for name in stack.orchestrator_names:
        stack.kill(name, signal.SIGTERM)
    before = len(monitor.firings)
    wait_until(lambda: time.time() > due + 3.0)  # four firings were due while none ran
    assert len(monitor.firings) == before
    for name in stack.orchestrator_names:
        stack.start_one(name)
    stack.wait_healthy(timeout=60)
    with httpx.Client(base_url=stack.urls[1], timeout=30) as other:
        after_restart = runs_of(other, made["id"])
        wait_until(lambda: runs_of(other, made["id"]) >= after_restart + 3)
        assert other.delete(f"/api/schedules/{made['id']}").status_code == 204
    history = finished_turn(api, made["session_id"])
    assert history[-1]["content"] == "HEARTBEAT_OK"

    # A firing in flight when the schedule was deleted still runs: a turn of the user's in the
    # same session, queued after it, runs only once it is done (one turn at a time, in order).
    probe = api.post("/api/chat", json={"message": PROBE, "session_id": made["session_id"]})
    assert wait_task(api, probe.json()["task_id"])["status"] == "completed"
    counts = Counter(monitor.firings)
    assert all(n == 1 for n in counts.values()), counts  # no due time reached the model twice
    assert "?" not in counts and len(counts) >= 7
    # The missed firings of the downtime were not replayed: one late firing, then every second.
    dues = sorted(datetime.fromisoformat(f.split(" ", 1)[1]) for f in counts)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(dues)]
    assert sum(1 for gap in gaps if gap > 2.5) == 1, gaps
