"""Exec approvals through the whole stack (two orchestrators, one PostgreSQL, the real
tool-runner and sandbox, the fake LLM): the policy over REST, an exec that pauses its turn
until a person answers from the other replica, denials the model reads, allow-always widening
the allowlist, unanswered questions taking the fallback, and 404s that say which."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM
from tests.stacks import running_stack, wait_task

TERMINAL_EVENTS = ("task.completed", "task.failed", "task.cancelled", "task.interrupted")
TIMEOUT = 12  # seconds an approval waits before the fallback
POLICY = '{"security": "allowlist", "ask": "on-miss", "allowlist": ["/usr/bin/ls"]}'
ENV = {
    "CRAYFISH_AUTO_RECALL": "false",
    "CRAYFISH_APPROVAL_POLICY": POLICY,
    "CRAYFISH_APPROVAL_TIMEOUT": str(TIMEOUT),
    "CRAYFISH_WORKER_HEARTBEAT": "0.5",
    "CRAYFISH_WORKER_STALLED_AFTER": "2",
}


@pytest.fixture(scope="module")
def replicas(fake_llm: FakeLLM) -> Iterator[LocalStack]:
    files = {"victim.txt": "keep me\n"}
    with running_stack(fake_llm.base_url, files, env=ENV, orchestrators=2) as stack:
        yield stack


@pytest.fixture
def one(replicas: LocalStack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=replicas.urls[0], timeout=60) as client:
        yield client


@pytest.fixture
def other(replicas: LocalStack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=replicas.urls[1], timeout=60) as client:
        yield client


def exec_turn(fake: FakeLLM, api: httpx.Client, command: str, session: str) -> str:
    """Sends a turn whose model runs `command`, then answers "done"; its task id."""
    fake.reply_tool_calls(("exec", {"command": command}))
    fake.reply_text("done")
    reply = api.post("/api/chat", json={"message": f"run {command}", "session_id": session})
    assert reply.status_code == 202, reply.text
    return str(reply.json()["task_id"])


def waiting_approval(api: httpx.Client, task_id: str, within: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for approval in api.get("/api/approvals").json()["approvals"]:
            if approval["task_id"] == task_id:
                return dict(approval)
        time.sleep(0.05)
    raise AssertionError(f"task {task_id} never asked for an approval")


def tool_message(fake: FakeLLM) -> str:
    """What the model read as the result of its exec call (the last request's tool message)."""
    return str(fake.last_request["messages"][-1]["content"])


def test_the_policy_is_read_and_replaced_over_rest(one: httpx.Client, other: httpx.Client):
    assert one.get("/api/approvals/policy").json() == {
        "security": "allowlist",
        "ask": "on-miss",
        "ask_fallback": "deny",
        "allowlist": ["/usr/bin/ls"],
    }
    bad = one.put("/api/approvals/policy", json={"security": "open"})
    assert bad.status_code == 400 and "security" in bad.json()["error"]["message"], bad.text
    bad = one.put("/api/approvals/policy", json={"allowlist": ["/usr/bin/ls", "ls"]})
    assert bad.status_code == 400 and "allowlist[1]" in bad.json()["error"]["message"], bad.text
    assert other.get("/api/approvals/policy").json()["allowlist"] == ["/usr/bin/ls"]
    body = {"security": "allowlist", "ask": "on-miss", "allowlist": ["/usr/bin/ls", "/bin/true"]}
    assert one.put("/api/approvals/policy", json=body).status_code == 200
    assert other.get("/api/approvals/policy").json()["allowlist"] == body["allowlist"]
    one.put("/api/approvals/policy", json={**body, "allowlist": ["/usr/bin/ls"]})


def test_an_allowlisted_command_runs_without_asking(fake_llm: FakeLLM, one: httpx.Client):
    task = wait_task(one, exec_turn(fake_llm, one, "ls victim.txt", "listed"))
    assert task["status"] == "completed"
    assert "victim.txt" in tool_message(fake_llm)


def test_a_chained_command_waits_and_a_denial_is_a_tool_error(
    fake_llm: FakeLLM, one: httpx.Client, other: httpx.Client, replicas: LocalStack
):
    task_id = exec_turn(fake_llm, one, "ls && rm -f victim.txt", "denied")
    approval = waiting_approval(other, task_id)
    assert approval["command"] == "ls && rm -f victim.txt"
    assert approval["missing"] == ["/usr/bin/rm"] and approval["workdir"] == "/workspace"
    assert len(approval["id"]) == 6
    assert other.get(f"/api/tasks/{task_id}").json()["status"] == "awaiting_approval"
    answer = other.post(f"/api/approvals/{approval['id'].upper()}", json={"decision": "deny"})
    assert answer.status_code == 200 and answer.json()["status"] == "denied", answer.text
    assert wait_task(one, task_id)["status"] == "completed"
    assert "a person denied this command" in tool_message(fake_llm)
    assert (replicas.workspace / "victim.txt").exists()
    events = [e for e in _event_types(one, task_id) if e.startswith("approval.")]
    assert events == ["approval.requested", "approval.answered"]
    again = other.post(f"/api/approvals/{approval['id']}", json={"decision": "allow-once"})
    assert again.status_code == 404 and again.json()["error"]["code"] == "approval_task_ended"


def test_allow_once_runs_it_and_allow_always_widens_the_allowlist(
    fake_llm: FakeLLM, one: httpx.Client, other: httpx.Client, replicas: LocalStack
):
    (replicas.workspace / "a.txt").write_text("a")
    task_id = exec_turn(fake_llm, one, "rm -f a.txt", "once")
    approval = waiting_approval(one, task_id)
    assert other.post(
        f"/api/approvals/{approval['id']}", json={"decision": "allow-once"}
    ).is_success
    assert wait_task(one, task_id)["status"] == "completed"
    assert not (replicas.workspace / "a.txt").exists()
    assert "/usr/bin/rm" not in one.get("/api/approvals/policy").json()["allowlist"]

    task_id = exec_turn(fake_llm, one, "rm -f b.txt", "always")
    approval = waiting_approval(one, task_id)
    decision = {"decision": "allow-always"}
    assert other.post(f"/api/approvals/{approval['id']}", json=decision).is_success
    assert wait_task(one, task_id)["status"] == "completed"
    assert "/usr/bin/rm" in one.get("/api/approvals/policy").json()["allowlist"]
    task_id = exec_turn(fake_llm, one, "rm -f c.txt", "always")
    assert wait_task(one, task_id)["status"] == "completed"
    assert "approval.requested" not in _event_types(one, task_id)
    one.put("/api/approvals/policy", json={"security": "allowlist", "allowlist": ["/usr/bin/ls"]})


def test_unanswered_questions_take_the_fallback(
    fake_llm: FakeLLM, one: httpx.Client, replicas: LocalStack
):
    task_id = exec_turn(fake_llm, one, "rm -f victim.txt", "unanswered")
    waiting_approval(one, task_id)
    task = wait_task(one, task_id, timeout=TIMEOUT + 30)
    assert task["status"] == "completed"
    assert "nobody answered approval" in tool_message(fake_llm)
    assert (replicas.workspace / "victim.txt").exists()
    assert "approval.expired" in _event_types(one, task_id)


def test_unknown_ids_and_bad_decisions_say_which(fake_llm: FakeLLM, one: httpx.Client):
    unknown = one.post("/api/approvals/zzzzzz", json={"decision": "deny"})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "approval_not_found"
    task_id = exec_turn(fake_llm, one, "rm -f victim.txt", "bad")
    approval = waiting_approval(one, task_id)
    wrong = one.post(f"/api/approvals/{approval['id']}", json={"decision": "yes"})
    assert wrong.status_code == 400 and "allow-once" in wrong.json()["error"]["message"]
    assert one.post(f"/api/approvals/{approval['id']}", json={"decision": "deny"}).is_success
    answered = one.post(f"/api/approvals/{approval['id']}", json={"decision": "deny"})
    assert answered.status_code in (404, 409), answered.text
    wait_task(one, task_id)


def _event_types(api: httpx.Client, task_id: str) -> list[str]:
    types = []
    with api.stream("GET", f"/api/tasks/{task_id}/events") as response:
        for line in response.iter_lines():
            if line.startswith("event:"):
                types.append(line.split(":", 1)[1].strip())
                if types[-1].startswith("task.") and types[-1] not in (
                    "task.queued",
                    "task.started",
                ):
                    break
    return types


def test_two_answers_at_once_on_two_replicas_one_wins(
    fake_llm: FakeLLM, one: httpx.Client, other: httpx.Client
):
    task_id = exec_turn(fake_llm, one, "rm -f race.txt", "race")
    approval = waiting_approval(one, task_id)
    path = f"/api/approvals/{approval['id']}"
    answers: dict[str, int] = {}

    def send(client: httpx.Client, decision: str) -> None:
        answers[decision] = client.post(path, json={"decision": decision}).status_code

    racers = [
        threading.Thread(target=send, args=(one, "deny")),
        threading.Thread(target=send, args=(other, "allow-once")),
    ]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    assert sorted(answers.values()) in ([200, 404], [200, 409]), answers
    winner = next(d for d, status in answers.items() if status == 200)
    assert wait_task(one, task_id)["status"] == "completed"
    ran = "a person denied" not in tool_message(fake_llm)
    assert ran == (winner == "allow-once")


def crayfish(url: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it (this tree's), against `url`."""
    return subprocess.run(
        [sys.executable, "-m", "crayfish_cli", "--url", url, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_the_cli_shows_and_changes_the_policy(replicas: LocalStack, one: httpx.Client):
    url = replicas.urls[1]
    shown = crayfish(url, "approvals", "policy")
    assert shown.returncode == 0 and "security      allowlist" in shown.stdout, shown.stderr
    changed = crayfish(url, "approvals", "policy", "--allow", "/usr/bin/cat", "--ask", "always")
    assert changed.returncode == 0, changed.stderr
    policy = one.get("/api/approvals/policy").json()
    assert policy["allowlist"] == ["/usr/bin/ls", "/usr/bin/cat"] and policy["ask"] == "always"
    bad = crayfish(url, "approvals", "policy", "--allow", "cat")
    assert bad.returncode == 2 and "allowlist[2]" in bad.stderr, bad.stderr
    back = crayfish(url, "approvals", "policy", "--remove", "/usr/bin/cat", "--ask", "on-miss")
    assert back.returncode == 0 and one.get("/api/approvals/policy").json() == {
        "security": "allowlist",
        "ask": "on-miss",
        "ask_fallback": "deny",
        "allowlist": ["/usr/bin/ls"],
    }


def test_the_cli_lists_and_answers_waiting_commands(
    fake_llm: FakeLLM, replicas: LocalStack, one: httpx.Client
):
    url = replicas.urls[1]
    task_id = exec_turn(fake_llm, one, "rm -f victim.txt", "cli-list")
    approval = waiting_approval(one, task_id)
    listed = crayfish(url, "approvals", "list")
    assert approval["id"] in listed.stdout and "rm -f victim.txt" in listed.stdout, listed.stdout
    denied = crayfish(url, "approvals", "deny", approval["id"])
    assert denied.returncode == 0 and "deny" in denied.stdout, denied.stderr
    assert wait_task(one, task_id)["status"] == "completed"
    assert "a person denied" in tool_message(fake_llm)
    gone = crayfish(url, "approvals", "allow", approval["id"])
    assert gone.returncode == 2 and "has ended" in gone.stderr, gone.stderr


def test_crayfish_chat_asks_before_a_command_runs(fake_llm: FakeLLM, replicas: LocalStack):
    (replicas.workspace / "chat.txt").write_text("x")
    fake_llm.reply_tool_calls(("exec", {"command": "rm -f chat.txt"}))
    fake_llm.reply_text("removed it")
    chat = crayfish(replicas.urls[1], "chat", "--session", "cli-chat", stdin="remove it\nyes\no\n")
    assert chat.returncode == 0, chat.stderr
    assert "? approve `rm -f chat.txt`" in chat.stderr, chat.stderr
    assert "▶ approval" in chat.stderr and "allow-once" in chat.stderr, chat.stderr
    assert "removed it" in chat.stdout
    assert not (replicas.workspace / "chat.txt").exists()


def runner_and_other(stack: LocalStack, task_id: str) -> tuple[str, str]:
    """(the orchestrator running the task, the other one), from the runner the store records."""
    assert stack.database_url is not None
    with psycopg.connect(stack.database_url) as conn:
        row = conn.execute("SELECT runner FROM tasks WHERE id = %s", (task_id,)).fetchone()
    assert row is not None
    names = stack.orchestrator_names
    port = int(str(row[0]).split(":")[1])
    runner = names[port - stack.http_port]
    return runner, next(n for n in names if n != runner)


def restart(stack: LocalStack, name: str, sig: int = signal.SIGTERM) -> None:
    stack.kill(name, sig)
    stack.start_one(name)
    stack.wait_healthy(timeout=120)


def test_a_question_outlives_a_restart_of_the_replica_that_answers(
    fake_llm: FakeLLM, replicas: LocalStack, one: httpx.Client
):
    task_id = exec_turn(fake_llm, one, "rm -f victim.txt", "restart")
    approval = waiting_approval(one, task_id)
    _, other = runner_and_other(replicas, task_id)
    restart(replicas, other)
    with httpx.Client(base_url=replicas.url_of(other), timeout=60) as restarted:
        assert approval["id"] in [
            a["id"] for a in restarted.get("/api/approvals").json()["approvals"]
        ]
        assert restarted.post(
            f"/api/approvals/{approval['id']}", json={"decision": "deny"}
        ).is_success
        assert wait_task(restarted, task_id)["status"] == "completed"
    assert "a person denied" in tool_message(fake_llm)


def test_a_question_whose_replica_died_answers_that_its_task_ended(
    fake_llm: FakeLLM, replicas: LocalStack
):
    with httpx.Client(base_url=replicas.url, timeout=60) as first:
        task_id = exec_turn(fake_llm, first, "rm -f victim.txt", "died")
        approval = waiting_approval(first, task_id)
    runner, other = runner_and_other(replicas, task_id)
    replicas.kill(runner)
    try:
        with httpx.Client(base_url=replicas.url_of(other), timeout=60) as alive:
            assert wait_task(alive, task_id)["status"] == "interrupted"
            assert alive.get("/api/approvals").json()["approvals"] == []
            late = alive.post(f"/api/approvals/{approval['id']}", json={"decision": "allow-once"})
            assert late.status_code == 404, late.text
            assert late.json()["error"]["code"] == "approval_task_ended"
            assert "has ended (interrupted)" in late.json()["error"]["message"]
    finally:
        replicas.start_one(runner)
        replicas.wait_healthy(timeout=120)
    assert (replicas.workspace / "victim.txt").exists()
