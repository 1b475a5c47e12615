"""A killed orchestrator loses no acknowledged message and its turn ends as `interrupted`; a
cancelled turn stops its tools."""

from __future__ import annotations

import subprocess
import time

import httpx

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, Reply
from tests.integration.test_chat_turn import last_tool_output
from tests.stacks import wait_task

# A dead orchestrator is noticed after 2 s without liveness marks (10 s by default).
STACK_ENV = {"CRAYFISH_WORKER_ALIVE_EVERY": "0.5", "CRAYFISH_WORKER_STALLED_AFTER": "2"}


def _wait(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def _sandbox_processes(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True)
    return [line for line in found.stdout.splitlines() if "pgrep" not in line]


def test_kill_9_mid_turn_interrupts_it_keeps_history_valid_and_runs_queued_messages(
    stack: LocalStack, api: httpx.Client, fake_llm: FakeLLM
):
    fake_llm.reply_tool_calls(("exec", {"command": "echo step-one-done"}))
    fake_llm.reply_text("never delivered", delay=30)  # the orchestrator dies while waiting
    first = api.post("/api/chat", json={"message": "long job", "session_id": "crash"}).json()
    fake_llm.wait_for_requests(len(fake_llm.requests) + 2, timeout=30)
    second = api.post("/api/chat", json={"message": "are you there?", "session_id": "crash"})
    assert second.json()["status"] == "queued"

    stack.kill("orchestrator")
    fake_llm.reset()
    fake_llm.reply_with(lambda body: Reply(text=f"back, with {len(body['messages'])} messages"))
    stack.start_one("orchestrator")
    stack.wait_healthy(timeout=60)

    history = api.get("/api/sessions/crash").json()["messages"]
    roles = [m["role"] for m in history]
    assert roles[:3] == ["user", "assistant", "tool"]
    assert history[0]["content"] == "long job"
    assert "step-one-done" in history[2]["content"]
    _wait(
        lambda: any(
            m.get("content") == "are you there?"
            for m in api.get("/api/sessions/crash").json()["messages"]
        )
    )
    _wait(lambda: api.get("/api/sessions/crash").json()["messages"][-1]["role"] == "assistant")
    final = api.get("/api/sessions/crash").json()["messages"][-1]["content"]
    assert final.startswith("back, with")  # the fake accepted the restored history
    interrupted = wait_task(api, first["task_id"])  # the task id answers after the restart
    assert interrupted["status"] == "interrupted"
    assert "nothing was retried" in interrupted["error"]
    with api.stream("GET", f"/api/tasks/{first['task_id']}/events") as events:
        types = [line.split(": ", 1)[1] for line in events.iter_lines() if line.startswith("event")]
    assert types[:2] == ["task.queued", "task.started"] and types[-1] == "task.interrupted"
    assert wait_task(api, second.json()["task_id"])["status"] == "completed"
    tools = [m for m in api.get("/api/sessions/crash").json()["messages"] if m["role"] == "tool"]
    assert len(tools) == 1  # the command was not run again


def test_cancel_stops_the_running_command_and_keeps_history_valid(
    api: httpx.Client, fake_llm: FakeLLM
):
    fake_llm.reply_tool_calls(("exec", {"command": "sleep 31337", "timeout": 120}))
    task_id = api.post("/api/chat", json={"message": "wait", "session_id": "cancel"}).json()[
        "task_id"
    ]
    _wait(lambda: bool(_sandbox_processes("sleep 31337")))
    cancelled = api.post(f"/api/tasks/{task_id}/cancel")
    assert cancelled.status_code == 200
    assert wait_task(api, task_id)["status"] == "cancelled"
    _wait(lambda: not _sandbox_processes("sleep 31337"), timeout=15)
    assert api.post(f"/api/tasks/{task_id}/cancel").status_code == 409

    fake_llm.reply_text("fresh start")
    after = api.post("/api/chat", json={"message": "again", "session_id": "cancel"}).json()
    assert wait_task(api, after["task_id"])["result"] == "fresh start"


def test_a_dead_service_degrades_clearly_and_recovers(
    stack: LocalStack, api: httpx.Client, fake_llm: FakeLLM
):
    stack.kill("memory")
    try:
        fake_llm.reply_tool_calls(("memory_search", {"query": "anything"}))
        fake_llm.reply_with(lambda body: Reply(text=last_tool_output(body)))
        task = wait_task(api, api.post("/api/chat", json={"message": "recall?"}).json()["task_id"])
        assert task["status"] == "completed", task  # the turn survives a dead dependency
        assert "memory" in task["result"] and "UNAVAILABLE" in task["result"]
        ready = api.get("/readyz")
        assert ready.status_code == 503
        memory = next(d for d in ready.json()["dependencies"] if d["name"] == "memory")
        assert memory["ok"] is False and memory["detail"]
        search = api.post("/api/memory/search", json={"query": "x"})
        assert search.status_code == 503 and "memory service" in search.json()["error"]["message"]
    finally:
        stack.start_one("memory")
        stack.wait_healthy(timeout=120)
    _wait(lambda: api.get("/readyz").status_code == 200, timeout=10)
