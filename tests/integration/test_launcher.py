"""`make run` as a user meets it: `python -m devstack.launcher` as a real process on its own data
folder (embedded PostgreSQL included), read through its output. A second run on the same folder
refuses and leaves the first serving; a port in use is one line naming the variable that moves
it; the live workspace is a copy in the data folder; an LLM that does not answer is said at
start-up, in /readyz, and a turn failing on it logs one line, not a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from crayfish_common.healthcheck import check

from devstack.instance import GRPC_PORT_VARIABLES, TEMPLATE
from devstack.launcher import free_port
from tests.stacks import wait_task

REPO = Path(__file__).resolve().parents[2]
UP = "Crayfish is up"


@dataclass
class Launched:
    process: subprocess.Popen[bytes]
    env: dict[str, str]
    root: Path
    output: Path
    url: str

    def text(self) -> str:
        return self.output.read_text(errors="replace")


def launcher_env(root: Path, **extra: str) -> dict[str, str]:
    """The environment of a user's shell, without the settings of this test session."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CRAYFISH_", "OPENAI_", "TOOL_RUNNER_", "MEMORY_", "SKILLS_"))
    }
    return {
        **clean,
        "PYTHONPATH": str(REPO),  # devstack is not installed: `make run` runs from the clone
        "CRAYFISH_DATA_DIR": str(root / "data"),
        "CRAYFISH_AUTO_RECALL": "false",
        **extra,
    }


def launch(env: dict[str, str], root: Path, name: str) -> tuple[subprocess.Popen[bytes], Path]:
    output = root / f"{name}.out"
    with output.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "devstack.launcher"],
            env=env,
            cwd=root,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    return process, output


def closed_port() -> int:
    """A loopback port nothing listens on (an LLM server that is not running)."""
    return free_port()


@pytest.fixture(scope="module")
def launched() -> Iterator[Launched]:
    root = Path(tempfile.mkdtemp(prefix="crayfish-launcher-"))
    root.chmod(0o755)  # the sandbox uid traverses it to the workspace
    port = free_port()
    grpc_ports = {variable: str(free_port()) for variable in GRPC_PORT_VARIABLES.values()}
    env = launcher_env(
        root,
        **grpc_ports,
        CRAYFISH_HTTP_PORT=str(port),
        OPENAI_BASE_URL=f"http://127.0.0.1:{closed_port()}/v1",
        OPENAI_API_KEY="sk-test",
        CRAYFISH_LLM_RETRIES="0",
    )
    process, output = launch(env, root, "first")
    found = Launched(process, env, root, output, f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 240
        while UP not in found.text():
            assert process.poll() is None, f"the launcher exited:\n{found.text()[-3000:]}"
            assert time.monotonic() < deadline, f"not up in 240 s:\n{found.text()[-3000:]}"
            time.sleep(0.2)
        yield found
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        subprocess.run(["rm", "-rf", str(root)], check=False)


def lines_with(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


def test_a_second_run_on_the_data_folder_refuses_and_the_first_keeps_serving(launched: Launched):
    process, output = launch(launched.env, launched.root, "second")
    assert process.wait(timeout=120) == 1
    said = output.read_text().strip().splitlines()
    assert len(said) == 1, said
    assert "already running" in said[0], said[0]
    assert f"pid {launched.process.pid}" in said[0] and launched.url in said[0], said[0]
    ready = httpx.get(f"{launched.url}/readyz", timeout=10)
    assert ready.status_code == 200, ready.text
    database = [d for d in ready.json()["dependencies"] if d["name"] == "database"]
    assert database and database[0]["ok"], ready.text
    sessions = httpx.get(f"{launched.url}/api/sessions", timeout=10)
    assert sessions.status_code == 200, sessions.text


def test_each_grpc_service_listens_on_the_port_its_variable_names(launched: Launched):
    for variable in GRPC_PORT_VARIABLES.values():
        assert check(f"127.0.0.1:{launched.env[variable]}", timeout=5.0), variable


def test_the_live_workspace_is_a_copy_in_the_data_folder(launched: Launched):
    live = launched.root / "data" / "workspace"
    assert (live / "AGENTS.md").read_text() == (TEMPLATE / "AGENTS.md").read_text()
    assert not (launched.root / "workspace").exists()
    if os.geteuid() == 0:  # the tool-runner gave the live copy to the sandbox uid, not the clone
        assert (live / "AGENTS.md").stat().st_uid == 65534
        assert (TEMPLATE / "AGENTS.md").stat().st_uid == REPO.stat().st_uid


def test_an_llm_that_does_not_answer_is_said_at_start_up_and_in_readyz(launched: Launched):
    said = lines_with(launched.text(), "turns will fail until it answers")
    assert len(said) == 1 and "not reachable" in said[0], launched.text()[-3000:]
    ready = httpx.get(f"{launched.url}/readyz", timeout=10)
    assert ready.status_code == 200 and ready.json()["ready"], ready.text
    llm = ready.json()["llm"]
    assert llm["configured"] and not llm["reachable"] and not llm["ok"], llm
    assert any("not reachable" in w for w in ready.json()["warnings"]), ready.text


def test_make_run_offers_the_browser_tools(launched: Launched):
    listed = httpx.get(f"{launched.url}/api/tools", timeout=10).json()
    browser = {tool["name"] for tool in listed["tools"] if tool.get("service") == "browser"}
    assert {"browser_open", "browser_snapshot", "browser_click", "browser_close"} <= browser, listed


def test_a_turn_failing_on_the_provider_logs_one_line_not_a_traceback(launched: Launched):
    with httpx.Client(base_url=launched.url, timeout=30) as api:
        task_id = api.post("/api/chat", json={"message": "hello?"}).json()["task_id"]
        assert wait_task(api, task_id)["status"] == "failed"
    deadline = time.monotonic() + 10
    while not lines_with(launched.text(), f"task {task_id} failed"):
        assert time.monotonic() < deadline, launched.text()[-3000:]
        time.sleep(0.1)
    assert len(lines_with(launched.text(), f"task {task_id} failed")) == 1
    assert "Traceback" not in launched.text()


@pytest.mark.parametrize("variable", ["CRAYFISH_HTTP_PORT", "MEMORY_PORT"])
def test_a_port_in_use_is_one_line_naming_the_variable_that_moves_it(variable: str):
    root = Path(tempfile.mkdtemp(prefix="crayfish-port-"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = launcher_env(root, **{variable: str(port)})
        if variable != "CRAYFISH_HTTP_PORT":
            env["CRAYFISH_HTTP_PORT"] = str(free_port())
        process, output = launch(env, root, "run")
        assert process.wait(timeout=300) == 1
    said = output.read_text().strip().splitlines()
    assert len(said) == 1, said
    assert f"port {port} is in use" in said[0] and variable in said[0], said[0]
    subprocess.run(["rm", "-rf", str(root)], check=False)


def test_the_orchestrator_alone_names_its_port_in_use():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = launcher_env(
            Path(tempfile.gettempdir()),
            CRAYFISH_HTTP_PORT=str(port),
            CRAYFISH_DATABASE_URL="postgresql://nobody@/none",
        )
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator"], env=env, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    said = done.stderr.strip().splitlines()
    assert len(said) == 1 and f"{port}" in said[0] and "CRAYFISH_HTTP_PORT" in said[0], said


@pytest.mark.parametrize(
    ("module", "variable"),
    [("skills", "SKILLS_PORT"), ("connectors", "CONNECTORS_PORT"), ("browser", "BROWSER_PORT")],
)
def test_a_grpc_service_alone_names_its_port_in_use(module: str, variable: str, tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        prefix = variable.removesuffix("PORT")
        env = launcher_env(
            tmp_path,
            **{variable: str(port)},
            **{f"{prefix}WORKSPACE": str(tmp_path), f"{prefix}DATA_DIR": str(tmp_path / "data")},
        )
        done = subprocess.run(
            [sys.executable, "-m", module], env=env, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert f"127.0.0.1:{port}" in last and variable in last, last
