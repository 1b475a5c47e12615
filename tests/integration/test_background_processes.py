"""Background processes through the whole stack (two orchestrators, the bwrap tool-runner, the
fake LLM): a process started with notify_on_exit wakes its session with exactly one turn,
cancelling the turn that started processes kills them, deleting the session kills its own."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, Reply
from tests.stacks import running_stack, wait_task

pytestmark = pytest.mark.slow  # starts the whole stack

STACK_ENV = {"CRAYFISH_AUTO_RECALL": "false"}
WAKE = "[Background process "


@pytest.fixture(scope="module")
def stack(fake_llm: FakeLLM) -> Iterator[LocalStack]:
    with running_stack(fake_llm.base_url, env=STACK_ENV, orchestrators=2) as stack:
        yield stack


def last_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1].get("content") or ""
    return content if isinstance(content, str) else str(content)


def started_process(fake: FakeLLM) -> str:
    """The id of the process the last exec call started, from the tool result the model saw."""
    for body in reversed(fake.requests):
        for message in reversed(body["messages"]):
            found = re.search(r"process (p[0-9a-f]{12}): running", str(message.get("content")))
            if message["role"] == "tool" and found:
                return found.group(1)
    raise AssertionError("no process was started")


def sandbox_pids(mark: str) -> list[int]:
    """Host pids of processes whose command line holds mark."""
    import os

    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if mark.encode() in handle.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def gone_within(mark: str, seconds: float = 10) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := sandbox_pids(mark)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_a_process_that_ends_wakes_its_session_once(stack: LocalStack, api, fake_llm):
    session = f"bg-{uuid.uuid4().hex[:8]}"
    command = "sleep 2; echo build-finished-ok"

    def model(body: dict[str, Any]) -> Reply:
        text = last_text(body)
        if text.startswith(WAKE):
            tail = "ok" if "build-finished-ok" in text else "missing"
            return Reply(text=f"The build is done (output {tail}).")
        if body["messages"][-1]["role"] == "tool":
            return Reply(text="Started the build in the background.")
        call = {"command": command, "background": True, "notify_on_exit": True}
        return Reply(tool_calls=[fake_llm.tool_call("exec", call)])

    fake_llm.reply_forever_with(model)
    task = api.post("/api/chat", json={"message": "build it", "session_id": session}).json()
    assert wait_task(api, task["task_id"])["status"] == "completed"
    process_id = started_process(fake_llm)
    wake_id = f"proc-{process_id}"
    deadline = time.monotonic() + 60
    while api.get(f"/api/tasks/{wake_id}").status_code == 404:
        assert time.monotonic() < deadline, "no wake-up turn"
        time.sleep(0.1)
    woken = wait_task(api, wake_id)
    assert woken["status"] == "completed" and woken["session_id"] == session
    record = stack.data_dir / "tool-runner" / "processes" / f"{process_id}.json"
    ended = json.loads(record.read_text())["ended"]
    print(
        f"process end -> wake-up turn queued {woken['created_at'] - ended:.3f} s, "
        f"answered {woken['finished_at'] - ended:.3f} s"
    )
    assert woken["result"] == "The build is done (output ok)."
    # Both replicas saw the end and queued the turn; one turn ran (one LLM request for it).
    logs = [(stack.log_dir / f"{name}.log") for name in stack.orchestrator_names]
    deadline = time.monotonic() + 20
    while True:
        seen = [f"wake-up turn {wake_id} queued" in log.read_text() for log in logs]
        if all(seen) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert all(seen), seen
    time.sleep(1)
    asked = [b for b in fake_llm.requests if last_text(b).startswith(WAKE + process_id)]
    print(f"wake-up turns for one end seen by 2 replicas: {len(asked)}")
    assert len(asked) == 1
    history = api.get(f"/api/sessions/{session}").json()
    assert "The build is done (output ok)." in str(history)


def test_cancelling_the_turn_kills_the_processes_it_started(api, fake_llm):
    session = f"bg-{uuid.uuid4().hex[:8]}"
    mark = f"{uuid.uuid4().int % 900 + 100}.{uuid.uuid4().int % 10**6:06d}"
    fake_llm.reply_tool_calls(("exec", {"command": f"sleep {mark}", "background": True}))
    fake_llm.reply_text("still thinking", delay=60)
    task = api.post("/api/chat", json={"message": "serve", "session_id": session}).json()
    fake_llm.wait_for_requests(len(fake_llm.requests) + 2, timeout=60)
    assert sandbox_pids(mark), "the process never ran"
    assert api.post(f"/api/tasks/{task['task_id']}/cancel").status_code == 200
    assert wait_task(api, task["task_id"])["status"] == "cancelled"
    left = gone_within(mark)
    print(f"processes left after the turn was cancelled: {len(left)}")
    assert left == []


def test_deleting_the_session_kills_its_processes(api: httpx.Client, fake_llm):
    session = f"bg-{uuid.uuid4().hex[:8]}"
    mark = f"{uuid.uuid4().int % 900 + 100}.{uuid.uuid4().int % 10**6:06d}"
    fake_llm.reply_tool_calls(("exec", {"command": f"sleep {mark}", "background": True}))
    fake_llm.reply_text("started")
    task = api.post("/api/chat", json={"message": "serve", "session_id": session}).json()
    assert wait_task(api, task["task_id"])["status"] == "completed"
    assert sandbox_pids(mark), "the process never ran"
    assert api.delete(f"/api/sessions/{session}").status_code == 204
    left = gone_within(mark)
    print(f"processes left after the session was deleted: {len(left)}")
    assert left == []


def test_writing_to_a_process_is_judged_like_a_command_under_an_allowlist(api, fake_llm):
    """A shell reading stdin would run whatever is written: under a policy other than `full`
    the written text must pass the exec policy as a command line."""
    session = f"bg-{uuid.uuid4().hex[:8]}"
    policy = {"security": "allowlist", "ask": "off", "allowlist": ["/usr/bin/cat"]}
    assert api.put("/api/approvals/policy", json=policy).status_code == 200
    try:
        fake_llm.reply_tool_calls(("exec", {"command": "cat", "background": True}))
        fake_llm.reply_text("started")
        task = api.post("/api/chat", json={"message": "cat", "session_id": session}).json()
        assert wait_task(api, task["task_id"])["status"] == "completed"
        process_id = started_process(fake_llm)
        write = {"action": "write", "process_id": process_id}
        fake_llm.reply_tool_calls(("process", {**write, "data": "rm -rf /workspace\n"}))
        fake_llm.reply_tool_calls(("process", {**write, "data": "cat\n"}))
        fake_llm.reply_text("done")
        task = api.post("/api/chat", json={"message": "write", "session_id": session}).json()
        assert wait_task(api, task["task_id"])["status"] == "completed"
        results = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]
        assert "not run: the exec policy refuses this command" in results[-2], results[-2]
        assert results[-1] == f"written to {process_id}", results[-1]
    finally:
        api.put("/api/approvals/policy", json={"security": "full", "ask": "off", "allowlist": []})
        api.delete(f"/api/sessions/{session}")


def test_a_killed_tool_runner_reports_its_processes_lost_and_wakes_the_session(
    stack: LocalStack, api, fake_llm
):
    session = f"bg-{uuid.uuid4().hex[:8]}"
    mark = f"{uuid.uuid4().int % 900 + 100}.{uuid.uuid4().int % 10**6:06d}"
    call = {"command": f"sleep {mark}", "background": True, "notify_on_exit": True}
    fake_llm.reply_tool_calls(("exec", call))
    fake_llm.reply_text("watching it")
    task = api.post("/api/chat", json={"message": "watch", "session_id": session}).json()
    assert wait_task(api, task["task_id"])["status"] == "completed"
    process_id = started_process(fake_llm)
    assert sandbox_pids(mark), "the process never ran"
    fake_llm.reply_forever_with(
        lambda body: Reply(text="It was lost." if "was lost" in last_text(body) else "?")
    )
    stack.kill("tool-runner")
    left = gone_within(mark)
    print(f"processes left after the tool-runner was killed: {len(left)}")
    assert left == []
    stack.start_one("tool-runner")
    stack.wait_healthy(timeout=120)
    wake_id = f"proc-{process_id}"
    deadline = time.monotonic() + 90
    while api.get(f"/api/tasks/{wake_id}").status_code == 404:
        assert time.monotonic() < deadline, "no wake-up turn for the lost process"
        time.sleep(0.2)
    woken = wait_task(api, wake_id)
    assert woken["status"] == "completed" and woken["result"] == "It was lost."


def test_with_two_runners_a_sessions_calls_reach_the_runner_of_its_processes(fake_llm):
    """Two tool-runners: the dev server one runner holds is reached by every later command of
    its session and found by `process poll` (the pool alone would spread them over both)."""
    port = free_port()
    server = f"python3 -m http.server {port} --bind 127.0.0.1"
    fetch = (
        'python3 -c "import urllib.request as u; '
        f"print(u.urlopen('http://127.0.0.1:{port}/page{{n}}.txt').read().decode())\""
    )
    files = {f"page{n}.txt": f"served-from-the-workspace {n}\n" for n in range(6)}
    with running_stack(fake_llm.base_url, files, STACK_ENV, tool_runners=2) as stack:
        with httpx.Client(base_url=stack.url, timeout=60) as api:
            session = f"bg-{uuid.uuid4().hex[:8]}"
            fake_llm.reply_tool_calls(("exec", {"command": server, "background": True}))
            fake_llm.reply_text("serving")
            task = api.post("/api/chat", json={"message": "serve", "session_id": session})
            assert wait_task(api, task.json()["task_id"])["status"] == "completed"
            process_id = started_process(fake_llm)
            # Distinct files: the loop's guard stops a turn that repeats a call and its result.
            calls = [("exec", {"command": fetch.format(n=n)}) for n in range(6)]
            fake_llm.reply_tool_calls(*calls)  # run side by side
            fake_llm.reply_tool_calls(("process", {"action": "poll", "process_id": process_id}))
            fake_llm.reply_with(lambda body: Reply(text="done"))
            task = api.post("/api/chat", json={"message": "check", "session_id": session})
            done = wait_task(api, task.json()["task_id"])
            assert done["status"] == "completed", done
            results = [
                m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"
            ]
            fetched = results[-7:-1]
            reached = sum(f"served-from-the-workspace {n}" in r for n, r in enumerate(fetched))
            print(f"with 2 tool-runners: {reached} of 6 fetches reached the session's server")
            assert reached == 6, fetched
            assert "GET /page5.txt" in results[-1], results[-1]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
