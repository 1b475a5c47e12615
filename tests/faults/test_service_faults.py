"""Service faults mid-turn: each gRPC dependency killed during a call, and a full data disk."""

from __future__ import annotations

import errno
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from devstack.launcher import LocalStack
from devstack.postgres import SYSTEM_USER as SERVER_USER
from tests.fakes import FakeLLM, Reply, ToolCall
from tests.stacks import print_figures, running_stack, wait_task

pytestmark = pytest.mark.slow

# Unique to this module, so the process table check sees only the commands started here.
LONG_EXEC = "sleep 60.0217 && echo never-printed"
MARKER = "60.0217"

SECRET = "sk-test-secret"  # the provider key tests.stacks gives the orchestrator

FIGURES = {
    "faults injected": 0,
    "faults survived": 0,
    "processes left behind": 0,
    "secrets leaked": 0,
}


@pytest.fixture(scope="module", autouse=True)
def _figures(request: pytest.FixtureRequest) -> Iterator[None]:
    """Prints this module's figures at its end, past pytest's output capture."""
    yield
    line = ", ".join(f"{name}: {count}" for name, count in FIGURES.items())
    print_figures(request, [f"\nservice faults: {line}"])


def last_tool_output(body: dict[str, Any]) -> str:
    return [m for m in body["messages"] if m["role"] == "tool"][-1]["content"]


def quote_tool_output(body: dict[str, Any]) -> Reply:
    return Reply(text=f"The tool said: {last_tool_output(body)}")


def sandbox_processes(marker: str) -> dict[int, str]:
    """pid -> command line of every process whose command line holds marker."""
    found = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True)
    procs = {}
    for line in found.stdout.splitlines():
        pid, _, command = line.partition(" ")
        if "pgrep" not in command:
            procs[int(pid)] = command
    return procs


def wait_until(predicate: Callable[[], object], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def wait_for_event(api: httpx.Client, task_id: str, event_type: str) -> dict[str, Any]:
    with api.stream("GET", f"/api/tasks/{task_id}/events") as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line.removeprefix("data: "))
                if event["type"] == event_type:
                    return event
    raise AssertionError(f"task {task_id} ended without a {event_type} event")


def chat(api: httpx.Client, message: str, session_id: str | None = None) -> dict[str, Any]:
    body = {"message": message, **({"session_id": session_id} if session_id else {})}
    accepted = api.post("/api/chat", json=body)
    assert accepted.status_code == 202, accepted.text
    return wait_task(api, accepted.json()["task_id"], timeout=60)


def dependency(api: httpx.Client, name: str) -> tuple[int, dict[str, Any]]:
    ready = api.get("/readyz")
    return ready.status_code, next(d for d in ready.json()["dependencies"] if d["name"] == name)


def freeze_then_call(stack: LocalStack, service: str, call: ToolCall) -> Callable[..., Reply]:
    """A reply function that stops the service (SIGSTOP) just before the model calls it, so the
    call is in flight, unanswered, when the test kills the service."""

    def reply(_body: dict[str, Any]) -> Reply:
        os.killpg(stack.processes[service].pid, signal.SIGSTOP)
        return Reply(tool_calls=[call])

    return reply


# (service, the call that uses it, the call that proves it works again, what that call returns)
CALLS = {
    "tool-runner": (
        ToolCall("exec", json.dumps({"command": LONG_EXEC, "timeout": 120})),
        ToolCall("exec", json.dumps({"command": "echo back-$((40+2))"})),
        "back-42",
    ),
    "memory": (
        ToolCall("memory_search", json.dumps({"query": "who plays the cello"})),
        ToolCall("memory_search", json.dumps({"query": "who plays the cello"})),
        "MEMORY.md#L",
    ),
    "skills": (
        ToolCall("read_skill", json.dumps({"name": "weather-report"})),
        ToolCall("read_skill", json.dumps({"name": "weather-report"})),
        "Read `forecast.json`",
    ),
}


@pytest.mark.parametrize("service", list(CALLS))
def test_a_dependency_killed_during_a_call_fails_the_call_clearly_and_comes_back(
    service: str, stack: LocalStack, api: httpx.Client, fake_llm: FakeLLM
):
    during, after, expected = CALLS[service]
    if service == "tool-runner":
        fake_llm.reply(Reply(tool_calls=[during]))  # a real long command is the call in flight
    else:
        fake_llm.reply_with(freeze_then_call(stack, service, during))
    fake_llm.reply_with(quote_tool_output)
    task_id = api.post("/api/chat", json={"message": f"use {service}"}).json()["task_id"]
    wait_for_event(api, task_id, "tool.started")
    sandboxed = {}
    if service == "tool-runner":
        # The command itself runs (not just the launcher chain that will exec bwrap).
        wait_until(lambda: f"sleep {MARKER}" in sandbox_processes(MARKER).values())
        sandboxed = sandbox_processes(MARKER)
    else:
        time.sleep(0.3)  # the call reaches the stopped service
    killed_at = time.monotonic()
    FIGURES["faults injected"] += 1
    stack.kill(service)
    try:
        task = wait_task(api, task_id, timeout=30)
        assert time.monotonic() - killed_at < 15, "the turn waited out the dead call"
        assert task["status"] == "completed", task  # the model saw the failure and answered
        assert f"the {service} service failed: UNAVAILABLE" in task["result"]
        if service == "tool-runner":
            left = leftovers(sandboxed, MARKER)
            FIGURES["processes left behind"] += len(left)
            assert not left, f"sandboxed processes outlived the killed tool-runner: {left}"
        status, state = dependency(api, service)
        assert status == 503 and state["ok"] is False and state["detail"], state
        fake_llm.reply_text(f"still here without {service}")
        degraded = chat(api, "are you still there?")
        assert degraded["status"] == "completed" and degraded["result"].startswith("still here")
    finally:
        stack.start_one(service)
        stack.wait_healthy(timeout=120)
    wait_until(lambda: api.get("/readyz").status_code == 200, timeout=10)
    fake_llm.reply(Reply(tool_calls=[ToolCall(after.name, after.arguments)]))
    fake_llm.reply_with(quote_tool_output)
    again = chat(api, f"use {service} again")
    assert again["status"] == "completed", again
    assert expected in again["result"], again["result"]
    FIGURES["faults survived"] += 1


def running(pid: int) -> bool:
    """Whether pid is a live process (a zombie waiting to be reaped is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def leftovers(seen: dict[int, str], marker: str, grace: float = 10.0) -> dict[int, str]:
    """The sandboxed processes (seen before the kill, or new ones) still running after grace."""
    deadline = time.monotonic() + grace
    while True:
        left = {p: c for p, c in seen.items() if running(p)} | sandbox_processes(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def test_a_tool_runner_killed_as_a_command_starts_leaves_nothing_once_restarted(
    stack: LocalStack, api: httpx.Client, fake_llm: FakeLLM
):
    """Killed while the sandbox is still being set up (before bwrap's --die-with-parent holds),
    the command can outlive the runner; the next runner kills it when it starts."""
    marker = "60.0389"
    fake_llm.reply_tool_calls(("exec", {"command": f"sleep {marker}", "timeout": 120}))
    fake_llm.reply_with(quote_tool_output)
    task_id = api.post("/api/chat", json={"message": "go"}).json()["task_id"]
    wait_until(lambda: sandbox_processes(marker), timeout=30)  # the launch has begun
    seen = sandbox_processes(marker)
    FIGURES["faults injected"] += 1
    stack.kill("tool-runner")
    try:
        task = wait_task(api, task_id, timeout=30)
        assert task["status"] == "completed", task
        assert "the tool-runner service failed: UNAVAILABLE" in task["result"]
    finally:
        stack.start_one("tool-runner")
        stack.wait_healthy(timeout=120)
    left = leftovers(seen, marker)
    FIGURES["processes left behind"] += len(left)
    assert not left, f"sandboxed processes outlived the tool-runner's restart: {left}"
    FIGURES["faults survived"] += 1


def test_no_secret_reaches_a_log_or_a_data_file(stack: LocalStack):
    """After the faults above: no traceback or dump put the provider key on disk."""
    assert stack.log_dir is not None
    files = [*stack.log_dir.glob("*.log"), *(p for p in stack.data_dir.rglob("*") if p.is_file())]
    found = [p.name for p in files if SECRET.encode() in p.read_bytes()]
    FIGURES["secrets leaked"] += len(found)
    assert not found


# -- a full data folder -------------------------------------------------------------------


@pytest.fixture
def small_data_dir() -> Iterator[Path]:
    """A 4 MiB tmpfs for the stack's data folder (the services' state, and a tablespace holding
    the session history)."""
    folder = Path(tempfile.mkdtemp(prefix="crayfish-full-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        folder.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=False)
        shutil.rmtree(folder, ignore_errors=True)


def fill(folder: Path) -> Path:
    """Writes a file until the filesystem holding folder has no byte left."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as handle:
        for size in (1 << 20, 1 << 12, 1):
            while True:
                try:
                    if handle.write(b"\0" * size) < size:
                        break
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    return filler


def history_on(stack: LocalStack, folder: Path) -> str:
    """Moves the session history's tables into a tablespace in `folder` (the data disk made
    small); returns the tablespace's name. The server's own files stay where they are."""
    assert stack.database_url is not None
    location = folder / "pg"
    location.mkdir()
    if os.geteuid() == 0:  # the server runs as the wheel's unprivileged user
        user = pwd.getpwnam(SERVER_USER)
        os.chown(location, user.pw_uid, user.pw_gid)
    space = f"full_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(stack.database_url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLESPACE {space} LOCATION '{location}'")
        for table in ("sessions", "session_records"):
            conn.execute(f"ALTER TABLE {table} SET TABLESPACE {space}")
            conn.execute(f"ALTER INDEX {table}_pkey SET TABLESPACE {space}")
    return space


def drop_database(stack: LocalStack, space: str) -> None:
    """After the stack: its database goes, then the tablespace (on the session's server)."""
    assert stack.database_url is not None
    info = psycopg.conninfo.conninfo_to_dict(stack.database_url)
    name, info["dbname"] = info["dbname"], "postgres"
    with psycopg.connect(psycopg.conninfo.make_conninfo(**info), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f"DROP TABLESPACE IF EXISTS {space}")


def incompressible(size: int) -> str:
    return os.urandom(size // 2).hex()


def test_a_full_data_disk_fails_the_turn_clearly_keeps_the_session_whole_and_recovers(
    fake_llm: FakeLLM, small_data_dir: Path
):
    stack_ref: list[LocalStack] = []
    space = ""
    try:
        with (
            running_stack(fake_llm.base_url, data_dir=small_data_dir) as stack,
            httpx.Client(base_url=stack.url, timeout=60) as api,
        ):
            stack_ref.append(stack)
            space = history_on(stack, small_data_dir)
            fake_llm.reply_text("first answer")
            assert chat(api, "remember this", "full")["result"] == "first answer"
            before = api.get("/api/sessions/full").json()["messages"]

            FIGURES["faults injected"] += 1
            filler = fill(small_data_dir)
            asked = len(fake_llm.requests)
            big = "hello? " + incompressible(100_000)  # needs new pages on the full disk
            refused = chat(api, big, "full")
            assert refused["status"] == "failed", refused
            assert "no space left" in (refused["error"] or "").lower(), refused
            assert len(fake_llm.requests) == asked  # a message it could not record is not run
            assert (
                api.get("/api/sessions/full").json()["messages"] == before
            )  # nothing half-written
            filler.unlink()

            # The disk fills while the model thinks: the answer cannot be saved.
            def fill_then_answer(_body: dict[str, Any]) -> Reply:
                fill(small_data_dir)
                return Reply(text="a long answer " + incompressible(200_000))

            fake_llm.reply_with(fill_then_answer)
            failed = chat(api, "write a lot", "full")
            assert failed["status"] == "failed", failed
            assert "no space left" in (failed["error"] or "").lower(), failed
            history = api.get("/api/sessions/full").json()["messages"]
            assert not any("a long answer" in str(m.get("content")) for m in history)

            (small_data_dir / "filler").unlink()
            fake_llm.reply_with(lambda body: Reply(text=f"{len(body['messages'])} messages"))
            recovered = chat(api, "still there?", "full")
            assert recovered["status"] == "completed", recovered
            # system, the first turn's user + assistant, the unanswered user message, this one
            assert recovered["result"] == "5 messages"
            history = api.get("/api/sessions/full").json()["messages"]
            assert [m["content"] for m in history if m["role"] == "user"] == [
                "remember this",
                "write a lot",
                "still there?",
            ]
    finally:
        if stack_ref and space:
            drop_database(stack_ref[0], space)
    FIGURES["faults survived"] += 1
