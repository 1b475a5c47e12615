"""Subagents across two orchestrator replicas on one PostgreSQL, with the real tool-runner: a
replica SIGKILLed while a child runs a sandboxed command ends the child `interrupted` and the
parent's session is told by the survivor, with no sandboxed process left behind; children that
complete are reported too, and the time from a child's end to the parent's answer is printed."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, Reply
from tests.stacks import print_figures, running_stack, wait_task

ENV = {
    "CRAYFISH_AUTO_RECALL": "false",
    "CRAYFISH_WORKER_ALIVE_EVERY": "0.5",
    "CRAYFISH_WORKER_STALLED_AFTER": "2",
}
CHILD_MARK = "## Subagent"  # in a child's system prompt (subagents/child_run.py)
MARKER = "sleep 31341"  # the child's sandboxed command, found by pgrep


@pytest.fixture(scope="module")
def pair(fake_llm: FakeLLM) -> Iterator[LocalStack]:
    with running_stack(fake_llm.base_url, env=ENV, orchestrators=2) as stack:
        yield stack


def sandboxed(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True)
    return [line for line in found.stdout.splitlines() if "pgrep" not in line]


def wait_until(condition: Any, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.05)


def runner_port(stack: LocalStack, task_id: str) -> int | None:
    """The HTTP port of the replica running the task (the store records its runner)."""
    assert stack.database_url is not None
    with psycopg.connect(stack.database_url) as conn:
        row = conn.execute(
            "SELECT runner FROM tasks WHERE id = %s AND status = 'running'", (task_id,)
        ).fetchone()
    return int(row[0].split(":")[1]) if row and row[0] else None


def script(fake: FakeLLM, tasks: list[str]) -> Any:
    """Parents spawn `tasks` at once and answer reports by quoting them; a child whose task
    names the marker runs it in the sandbox, any other answers at once."""

    def reply(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        users = [m["content"] for m in messages if m["role"] == "user"]
        done = any(m["role"] == "tool" for m in messages)
        if CHILD_MARK in messages[0]["content"]:
            if users[0].startswith("run") and not done:
                call = fake.tool_call("exec", {"command": MARKER, "timeout": 120})
                return Reply(tool_calls=[call])
            return Reply(text=f"result of {users[0].split()[0]}: 42")
        if users[-1].startswith("[Subagent report]"):
            return Reply(text="Told: " + users[-1].splitlines()[0])
        if not done:
            calls = [fake.tool_call("spawn", {"task": t, "label": t.split()[0]}) for t in tasks]
            return Reply(tool_calls=calls)
        return Reply(text="They are at work.")

    return reply


def reports(api: httpx.Client, session: str) -> list[str]:
    history = api.get(f"/api/sessions/{session}").json()["messages"]
    return [m["content"] for m in history if m["role"] == "assistant" and "Told:" in m["content"]]


def test_a_killed_replica_interrupts_the_child_and_the_parent_is_told(
    pair: LocalStack, fake_llm: FakeLLM
):
    fake_llm.reply_forever_with(script(fake_llm, ["run the survey"]))
    with httpx.Client(base_url=pair.url, timeout=30) as api:
        parent = api.post("/api/chat", json={"message": "survey", "session_id": "lead"}).json()
        assert wait_task(api, parent["task_id"])["status"] == "completed"
        (child,) = api.get("/api/tasks", params={"parent": parent["task_id"]}).json()
        wait_until(lambda: bool(sandboxed(MARKER)))
        port = runner_port(pair, child["task_id"])
    assert port is not None
    victim = pair.orchestrator_names[port - pair.http_port]
    survivor = next(n for n in pair.orchestrator_names if n != victim)
    pair.kill(victim)
    try:
        with httpx.Client(base_url=pair.url_of(survivor), timeout=30) as api:
            ended = wait_task(api, child["task_id"])
            assert ended["status"] == "interrupted", ended
            wait_until(lambda: bool(reports(api, "lead")))
            (told,) = reports(api, "lead")
            assert child["task_id"] in told and "interrupted" in told
            listed = api.get("/api/tasks", params={"parent": parent["task_id"]}).json()
            assert [(c["label"], c["status"], c["parent_session"]) for c in listed] == [
                ("run", "interrupted", "lead")
            ]
            wait_until(lambda: not sandboxed(MARKER), seconds=30)  # nothing left behind
    finally:
        pair.start_one(victim)


def test_time_from_a_childs_end_to_the_parents_answer(
    pair: LocalStack, fake_llm: FakeLLM, request: pytest.FixtureRequest
):
    tasks = ["alpha facts", "beta facts", "gamma facts"]
    fake_llm.reply_forever_with(script(fake_llm, tasks))
    with httpx.Client(base_url=pair.url, timeout=30) as api:
        parent = api.post("/api/chat", json={"message": "facts", "session_id": "fan"}).json()
        wait_task(api, parent["task_id"])
        wait_until(lambda: len(reports(api, "fan")) == 3)
        children = api.get("/api/tasks", params={"parent": parent["task_id"]}).json()
        assert sorted(c["status"] for c in children) == ["completed"] * 3
        told = "\n".join(reports(api, "fan"))
        assert all(c["task_id"] in told for c in children)
        gaps = []
        for child in children:
            report = wait_task(api, f"{child['task_id']}-report")
            assert report["session_id"] == "fan" and report["status"] == "completed"
            gaps.append((report["finished_at"] - child["finished_at"]) * 1000)
    print_figures(
        request,
        [
            "subagents: a child's end -> its parent's answer (report turn ended), 2 replicas, "
            f"fake LLM: median {statistics.median(gaps):.0f} ms, max {max(gaps):.0f} ms "
            f"(n={len(gaps)})"
        ],
    )
