"""Three orchestrators on one PostgreSQL and two tool-runners behind their round_robin channel:
turns sent to random replicas, one orchestrator SIGKILLed mid-turn. Every task ends alike on every
live replica, no two runs of a session overlap (seen at the fake LLM), no message is lost or
doubled, SSE resumes on another replica, cancel works from another replica, commands ran on both
tool-runners and still run with one of them dead, and after a full restart every task is still
there."""

from __future__ import annotations

import itertools
import random
import signal
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, Reply
from tests.stacks import running_stack, wait_task

ENV = {
    "CRAYFISH_AUTO_RECALL": "false",
    "CRAYFISH_WORKER_ALIVE_EVERY": "0.5",
    "CRAYFISH_WORKER_STALLED_AFTER": "2",
}
SESSIONS, TURNS = 6, 3
TERMINAL = ("completed", "failed", "cancelled", "interrupted")
# The delays and replica choices are drawn from generators seeded with this, so a run that
# failed draws them again (threads still interleave as they will).
SEED = 26


@pytest.fixture(scope="module")
def replicas(fake_llm: FakeLLM) -> Iterator[LocalStack]:
    with running_stack(fake_llm.base_url, env=ENV, orchestrators=3, tool_runners=2) as stack:
        yield stack


class Recorder:
    """The fake model's side: each request's turn, when it came and when its answer was due."""

    def __init__(self, fake: FakeLLM):
        self.fake = fake
        self.seen: list[tuple[str, float, float]] = []  # (turn message, arrival, answer due)
        self.lock = threading.Lock()
        self.random = random.Random(f"{SEED}-llm")

    def __call__(self, body: dict[str, Any]) -> Reply:
        turn = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        with self.lock:
            delay = self.random.uniform(0.2, 0.5)
            self.seen.append((turn, time.monotonic(), time.monotonic() + delay))
        if body["messages"][-1]["role"] == "user":
            call = self.fake.tool_call("exec", {"command": f"echo ran {turn}"})
            return Reply(tool_calls=[call], delay=delay)
        return Reply(text=f"done: {turn}", delay=delay)

    def runs(self) -> dict[str, list[tuple[str, float, float]]]:
        """Per session: (turn, first request, last answer) in the order the runs began."""
        spans: dict[str, list[float]] = {}
        for turn, arrival, due in self.seen:
            first, last = spans.get(turn, [arrival, due])
            spans[turn] = [min(first, arrival), max(last, due)]
        runs: dict[str, list[tuple[str, float, float]]] = defaultdict(list)
        for turn, (first, last) in sorted(spans.items(), key=lambda kv: kv[1][0]):
            runs[turn.split()[0]].append((turn, first, last))
        return runs


def send_turns(stack: LocalStack, session: str, sent: list[dict[str, Any]]) -> None:
    """The session's turns, in order, each to a random replica that is up."""
    draw = random.Random(f"{SEED}-{session}")
    for i in range(TURNS):
        for _ in range(50):
            url = draw.choice(stack.urls)
            try:
                reply = httpx.post(
                    f"{url}/api/chat",
                    json={"message": f"{session} turn {i}", "session_id": session},
                    timeout=10,
                )
                break
            except httpx.TransportError:
                continue  # the killed replica
        assert reply.status_code == 202, reply.text
        sent.append(reply.json())
        time.sleep(draw.uniform(0.0, 0.3))


def runner_of(stack: LocalStack, port: int) -> list[str]:
    """Ids of the tasks running on the replica at `port` that have begun (their message is in
    the history, so the LLM may have been asked and tools run); the store records the runner."""
    assert stack.database_url is not None
    with psycopg.connect(stack.database_url) as conn:
        rows = conn.execute(
            "SELECT id FROM tasks WHERE status = 'running' AND accepted AND runner LIKE %s",
            (f"%:{port}:%",),
        ).fetchall()
    return [row[0] for row in rows]


def test_replicas_share_the_work_and_survive_a_killed_one(replicas: LocalStack, fake_llm: FakeLLM):
    stack = replicas
    recorder = Recorder(fake_llm)
    fake_llm.reply_forever_with(recorder)
    sent: list[dict[str, Any]] = []
    senders = [
        threading.Thread(target=send_turns, args=(stack, f"s{k}", sent)) for k in range(SESSIONS)
    ]
    for sender in senders:
        sender.start()
    victim_port = stack.http_port + 1  # orchestrator-2
    deadline = time.monotonic() + 30
    while not runner_of(stack, victim_port):
        assert time.monotonic() < deadline, "orchestrator-2 never ran a turn"
        time.sleep(0.02)
    stack.kill("orchestrator-2")
    for sender in senders:
        sender.join()
    assert len(sent) == SESSIONS * TURNS

    live = [stack.url_of("orchestrator"), stack.url_of("orchestrator-3")]
    with (
        httpx.Client(base_url=live[0], timeout=30) as one,
        httpx.Client(base_url=live[1], timeout=30) as other,
    ):
        ended = {t["task_id"]: wait_task(one, t["task_id"]) for t in sent}
        for task_id, task in ended.items():
            assert other.get(f"/api/tasks/{task_id}").json() == task  # alike on every replica
        statuses = sorted(t["status"] for t in ended.values())
        assert set(statuses) <= {"completed", "interrupted"}, statuses
        assert "interrupted" in statuses  # the victim was running one

        # No two runs of a session overlapped, and they ran in the order sent.
        for session, runs in recorder.runs().items():
            for (_, _, end), (_, start, _) in itertools.pairwise(runs):
                assert end <= start + 0.05, (session, runs)
            assert [t for t, _, _ in runs] == sorted(t for t, _, _ in runs), runs

        # Each message is in its session's history once; completed turns have their answer.
        for k in range(SESSIONS):
            history = one.get(f"/api/sessions/s{k}").json()["messages"]
            users = [m["content"] for m in history if m["role"] == "user"]
            assert users == [f"s{k} turn {i}" for i in range(TURNS)], users
            for task in (t for t in ended.values() if t["session_id"] == f"s{k}"):
                if task["status"] == "completed":
                    assert {"role": "assistant", "content": task["result"]} in history

        # SSE: read a task's stream on one replica, resume it on another.
        task_id = next(i for i, t in ended.items() if t["status"] == "completed")
        whole = sse(one, f"/api/tasks/{task_id}/events")
        tail = sse(other, f"/api/tasks/{task_id}/events", last_id=whole[2][0])
        assert tail == whole[3:] and tail[-1][1] == "task.completed"

        # Cancel a running command from both replicas: whichever runs it, it stops.
        fake_llm.reply_forever_with(None)
        fake_llm.reply_tool_calls(("exec", {"command": "sleep 31338", "timeout": 120}))
        slow = one.post("/api/chat", json={"message": "slow", "session_id": "slow"}).json()
        wait_until(lambda: bool(sandboxed("sleep 31338")))
        started = time.monotonic()
        cancelled = other.post(f"/api/tasks/{slow['task_id']}/cancel").json()
        assert cancelled["status"] == "cancelled" and time.monotonic() - started < 5
        assert one.get(f"/api/tasks/{slow['task_id']}").json()["status"] == "cancelled"
        wait_until(lambda: not sandboxed("sleep 31338"))

        # The global stream resumes on another replica too.
        everything = sse(one, "/api/events", until="task.cancelled")
        resumed = sse(other, "/api/events", last_id=everything[-5][0], until="task.cancelled")
        assert resumed == everything[-4:]

    # The commands were spread over both tool-runners (each logs an audit line per call) ...
    assert stack.log_dir is not None
    for runner in stack.tool_runner_names:
        audit = (stack.log_dir / f"{runner}.log").read_text()
        assert audit.count("tool=exec") >= 2, f"{runner} ran {audit.count('tool=exec')} execs"
    # ... and with one of them dead, the other runs every command.
    stack.kill("tool-runner-2")
    with httpx.Client(base_url=live[0], timeout=30) as api:
        fake_llm.reply_forever_with(None)
        for k in range(4):
            fake_llm.reply_tool_calls(("exec", {"command": f"echo still {k}"}))
            fake_llm.reply_text(f"ok {k}")
            task = api.post("/api/chat", json={"message": "again", "session_id": "one-left"})
            done = wait_task(api, task.json()["task_id"])
            assert done["status"] == "completed", done
            sent_back = fake_llm.requests[-1]["messages"]
            assert any(f"still {k}" in str(m.get("content")) for m in sent_back)
    stack.start_one("tool-runner-2")

    # A full restart of every orchestrator: every task is still there.
    for name in stack.orchestrator_names:
        if stack.processes[name].poll() is None:
            stack.kill(name, signal.SIGTERM)
        stack.start_one(name)
    stack.wait_healthy(timeout=60)
    for url in stack.urls:
        with httpx.Client(base_url=url, timeout=30) as api:
            for task_id, task in ended.items():
                assert api.get(f"/api/tasks/{task_id}").json() == task


def sandboxed(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True)
    return [line for line in found.stdout.splitlines() if "pgrep" not in line]


def wait_until(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.05)


def sse(
    client: httpx.Client, path: str, last_id: int | None = None, until: str | None = None
) -> list[tuple[int, str]]:
    """(id, type) of a stream's events, to its end (or to the first `until` event)."""
    headers = {"Last-Event-ID": str(last_id)} if last_id is not None else {}
    found: list[tuple[int, str]] = []
    ident = 0
    with client.stream("GET", path, headers=headers) as events:
        for line in events.iter_lines():
            if line.startswith("id: "):
                ident = int(line[4:])
            elif line.startswith("event: "):
                found.append((ident, line[7:]))
                if line[7:] == until:
                    break
    return found
