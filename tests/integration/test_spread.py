"""Turns spread over idle replicas whichever replica accepted them: three orchestrators on one
PostgreSQL, every request through ONE keep-alive connection to the first replica's port (what a
client behind host networking or a sticky balancer does). The store records where each ran."""

from __future__ import annotations

import threading
from collections import Counter
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
    "CRAYFISH_WORKER_STALLED_AFTER": "3",
}
SESSIONS, TURNS = 6, 2
ANSWER_DELAY = 1.5  # seconds: a session's turn still runs while the others are sent


@pytest.fixture(scope="module")
def replicas(fake_llm: FakeLLM) -> Iterator[LocalStack]:
    with running_stack(fake_llm.base_url, env=ENV, orchestrators=3) as stack:
        yield stack


def replica_of(stack: LocalStack, runner: str) -> str:
    """The replica a runner name belongs to (`host:port:pid:token`), by its HTTP port."""
    port = int(runner.split(":")[1])
    return stack.orchestrator_names[port - stack.http_port]


def ran_on(stack: LocalStack, ids: list[str]) -> dict[str, str]:
    assert stack.database_url is not None
    with psycopg.connect(stack.database_url) as conn:
        rows = conn.execute("SELECT id, runner FROM tasks WHERE id = ANY(%s)", (ids,)).fetchall()
    return {task_id: replica_of(stack, runner) for task_id, runner in rows}


def test_turns_sent_to_one_replica_run_on_all_of_them(
    replicas: LocalStack, fake_llm: FakeLLM, request: pytest.FixtureRequest
):
    lock = threading.Lock()

    def answer(body: dict[str, Any]) -> Reply:
        with lock:
            if body["messages"][-1]["role"] == "user":
                turn = body["messages"][-1]["content"]
                return Reply(tool_calls=[fake_llm.tool_call("exec", {"command": f"echo {turn}"})])
            return Reply(text="done", delay=ANSWER_DELAY)

    fake_llm.reply_forever_with(answer)
    first_wave: list[str] = []
    ids: list[str] = []
    with httpx.Client(base_url=replicas.urls[0], timeout=30) as api:  # one connection
        for turn in range(TURNS):
            for session in range(SESSIONS):
                sent = api.post(
                    "/api/chat",
                    json={"message": f"t{turn}-s{session}", "session_id": f"s{session}"},
                )
                assert sent.status_code == 202, sent.text
                ids.append(sent.json()["task_id"])
                if turn == 0:
                    first_wave.append(ids[-1])
        for task_id in ids:
            assert wait_task(api, task_id, timeout=120)["status"] == "completed"
    where = ran_on(replicas, ids)
    per_replica = Counter(where.values())
    first = Counter(where[i] for i in first_wave)
    print_figures(
        request,
        [
            f"{len(ids)} turns sent to {replicas.orchestrator_names[0]} ran: {dict(per_replica)}",
            f"the first {SESSIONS} (sessions idle, sent at once): {dict(first)}",
        ],
    )
    assert set(per_replica) == set(replicas.orchestrator_names), per_replica
    # The first turn of each session ran together: the accepting replica kept its share only.
    assert max(first.values()) <= SESSIONS // len(replicas.orchestrator_names), first
