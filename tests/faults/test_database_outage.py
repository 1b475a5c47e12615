"""PostgreSQL killed (SIGKILL) under a running stack: the API answers 503 at once while it is
down (/readyz names it, /healthz stays a liveness check), a turn whose outcome met the dead
server ends once it is back and its session's line goes on, and under `make run` the launcher
restarts the server and the API works again within seconds, with no orchestrator restart."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from devstack.launcher import LocalStack, free_port
from devstack.postgres import EmbeddedPostgres
from tests.fakes import FakeLLM, Reply
from tests.stacks import print_figures, running_stack, wait_task

pytestmark = pytest.mark.slow

FIGURES: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def _figures(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    print_figures(request, ["", *(f"database outage: {k}: {v}" for k, v in FIGURES.items())])


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL server of this module's own (the session's is shared by other tests), whose
    commits survive a SIGKILL as `make run`'s do (FAST_SETTINGS's do not wait for the WAL)."""
    folder = Path(tempfile.mkdtemp(prefix="crayfish-outage-"))
    folder.chmod(0o755)
    pg = EmbeddedPostgres(folder / "data", {"fsync": "off"})  # (only a machine crash loses)
    pg.start()
    try:
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def stack(server: EmbeddedPostgres, fake_llm: FakeLLM) -> Iterator[LocalStack]:
    url = server.create_database("crayfish")
    with running_stack(fake_llm.base_url, database_url=url) as started:
        yield started


@pytest.fixture
def api(stack: LocalStack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.url, timeout=60) as client:
        yield client


def kill(server: EmbeddedPostgres) -> None:
    """SIGKILL to the server and all its processes."""
    assert server.process is not None
    kill_server(server.process.pid)
    server.process.wait()


def kill_server(postmaster: int) -> None:
    """SIGKILL to the postmaster and every process under it, as a killed container would have:
    each backend is a session of its own (PostgreSQL calls setsid), so its process group is
    not enough, and a backend left alive answers a query or two until it sees its postmaster
    gone. Stopped first, so it forks no new one meanwhile."""
    os.kill(postmaster, signal.SIGSTOP)
    doomed = [postmaster, *_descendants(postmaster)]
    for pid in doomed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    until(lambda: not any(_running(pid) for pid in doomed), timeout=30)


def _descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed child its parent has not reaped yet is done)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def until(check: Callable[[], bool], timeout: float = 60.0) -> float:
    """Seconds until `check()` holds; fails after `timeout`."""
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > timeout:
            raise AssertionError(f"not reached in {timeout:.0f} s")
        time.sleep(0.05)
    return time.monotonic() - began


def answers(api: httpx.Client) -> bool:
    try:
        return api.get("/api/sessions").status_code == 200
    except httpx.HTTPError:
        return False


def logged(stack: LocalStack, text: str) -> int:
    """How often the orchestrator's log has `text`."""
    assert stack.log_dir is not None
    log = stack.log_dir / "orchestrator.log"
    return log.read_text(errors="replace").count(text) if log.exists() else 0


def test_a_turn_whose_outcome_met_a_dead_database_ends_once_it_is_back_and_its_line_goes_on(
    server: EmbeddedPostgres, stack: LocalStack, api: httpx.Client, fake_llm: FakeLLM
):
    gate = threading.Event()
    fake_llm.reply_with(lambda body: Reply(text="the first answer") if gate.wait(60) else Reply())
    fake_llm.reply_text("the second answer")
    seen = len(fake_llm.requests)
    first = api.post("/api/chat", json={"message": "one", "session_id": "outage"}).json()
    fake_llm.wait_for_requests(seen + 1, timeout=30)
    second = api.post("/api/chat", json={"message": "two", "session_id": "outage"}).json()
    assert api.get(f"/api/tasks/{first['task_id']}").json()["status"] == "running"
    assert api.get(f"/api/tasks/{second['task_id']}").json()["status"] == "queued"

    kill(server)
    gate.set()  # the turn ends while the server is dead: its outcome cannot be written
    # Down until a second try has failed too (the server down longer than a try waits).
    until(lambda: logged(stack, "recording its outcome failed") >= 2, timeout=90)
    server.restart()
    until(lambda: answers(api))  # (503 until the orchestrator has reconnected)

    done = wait_task(api, first["task_id"], timeout=60)  # no orchestrator restart
    assert (done["status"], done["result"]) == ("completed", "the first answer")
    after = wait_task(api, second["task_id"], timeout=60)
    assert (after["status"], after["result"]) == ("completed", "the second answer")
    history = api.get("/api/sessions/outage").json()["messages"]
    assert [m["content"] for m in history if m["role"] == "assistant"] == [
        "the first answer",
        "the second answer",
    ]

    hold = threading.Event()
    fake_llm.reply_with(lambda body: Reply(text="never") if hold.wait(60) else Reply())
    seen = len(fake_llm.requests)
    third = api.post("/api/chat", json={"message": "three", "session_id": "outage"}).json()
    fake_llm.wait_for_requests(seen + 1, timeout=30)
    cancelled = api.post(f"/api/tasks/{third['task_id']}/cancel")
    hold.set()
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"


def test_while_the_database_is_dead_the_api_answers_503_at_once_and_readyz_names_it(
    server: EmbeddedPostgres, api: httpx.Client
):
    assert answers(api)
    kill(server)
    began = time.monotonic()
    reply = api.get("/api/sessions")
    first_503 = time.monotonic() - began
    assert reply.status_code == 503, reply.text
    assert reply.json()["error"]["code"] == "database_unavailable"
    assert "database" in reply.json()["error"]["message"] and reply.headers["Retry-After"]
    waits = []
    for _ in range(5):
        began = time.monotonic()
        assert api.get("/api/sessions").status_code == 503
        waits.append(time.monotonic() - began)
    sent = api.post("/api/chat", json={"message": "lost?", "session_id": "while-down"})
    assert sent.status_code == 503  # refused, not acknowledged and lost
    ready = api.get("/readyz")
    assert ready.status_code == 503
    database = next(d for d in ready.json()["dependencies"] if d["name"] == "database")
    assert database["ok"] is False and database["detail"]
    assert api.get("/healthz").status_code == 200  # liveness: a restart would not help

    server.restart()
    back = until(lambda: answers(api), timeout=120)
    assert api.get("/api/sessions/while-down").status_code == 404  # the refused one is not there
    FIGURES["first request after the kill"] = f"503 in {first_503:.2f} s"
    FIGURES["requests while down"] = f"503 in {max(waits):.2f} s at most"
    FIGURES["orchestrator back after the server"] = f"{back:.1f} s"


def test_make_run_restarts_a_killed_postgresql_and_the_api_works_again_within_seconds(
    fake_llm: FakeLLM,
):
    root = Path(tempfile.mkdtemp(prefix="crayfish-launcher-"))
    root.chmod(0o755)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "CRAYFISH_DATABASE_URL"}
    env.update(
        CRAYFISH_WORKSPACE=str(root / "workspace"),
        CRAYFISH_DATA_DIR=str(root / "data"),
        CRAYFISH_HTTP_PORT=str(port),
        OPENAI_BASE_URL=fake_llm.base_url,
        OPENAI_API_KEY="sk-test-secret",
        CRAYFISH_MODEL="fake-model",
    )
    launcher = subprocess.Popen(
        [sys.executable, "-m", "devstack.launcher"],
        env=env,
        stdout=(root / "launcher.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    api = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
    restarted = 0
    try:
        until(lambda: launcher.poll() is None and answers(api), timeout=180)
        postmaster = root / "data" / "postgres" / "postmaster.pid"
        pid = int(postmaster.read_text().split()[0])
        kill_server(pid)
        began = time.monotonic()
        assert api.get("/api/sessions").status_code == 503
        first_503 = time.monotonic() - began
        back = until(lambda: answers(api), timeout=120)
        assert launcher.poll() is None  # the launcher restarted it, and runs on
        restarted = int(postmaster.read_text().split()[0])
        assert restarted != pid
        fake_llm.reply_text("still here")
        task = api.post("/api/chat", json={"message": "hello?"}).json()
        assert wait_task(api, task["task_id"])["result"] == "still here"
        FIGURES["make run: first request after the kill"] = f"503 in {first_503:.2f} s"
        FIGURES["make run: API back after the kill"] = f"{back:.1f} s (server restarted)"
    except BaseException:
        print((root / "launcher.log").read_text(errors="replace")[-3000:])
        raise
    finally:
        api.close()
        launcher.send_signal(signal.SIGTERM)
        try:
            launcher.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
        shutil.rmtree(root, ignore_errors=True)
    assert not _alive(restarted)  # the restarted server stopped with the stack


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
