"""The whole stack as local processes for tests and benches: a workspace, the fake LLM, teardown."""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from devstack.launcher import LocalStack, free_port
from tests.postgres import fresh_database


@contextmanager
def running_stack(
    llm_url: str,
    files: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    data_dir: Path | None = None,
    orchestrators: int = 1,
    database_url: str | None = None,
    tool_runners: int = 1,
    channels: bool = False,
) -> Iterator[LocalStack]:
    """Starts all four services on free ports against llm_url; stops them all afterwards.

    `files` are written into the workspace (paths relative to it). The folder lives under
    /tmp with mode 0755 because the sandbox uid must traverse it (pytest's tmp dirs are 0700).
    `data_dir` (e.g. a small mount) replaces the data folder made beside the workspace. The
    orchestrators share a fresh database on the session's PostgreSQL server (tests/postgres.py)
    unless `database_url` names one (e.g. to start a second stack on the same store).
    """
    root = Path(tempfile.mkdtemp(prefix="crayfish-stack-"))
    root.chmod(0o755)
    workspace = root / "workspace"
    (workspace / "memory").mkdir(parents=True)
    for relative, content in (files or {}).items():
        path = workspace / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    stack = LocalStack(
        workspace=workspace,
        data_dir=data_dir or root / "data",
        http_port=free_port(orchestrators),
        log_dir=root / "logs",
        orchestrators=orchestrators,
        tool_runners=tool_runners,
        channels=channels,
        database_url=database_url or fresh_database(),
        extra_env={
            "OPENAI_BASE_URL": llm_url,
            "OPENAI_API_KEY": "sk-test-secret",
            "CRAYFISH_MODEL": "fake-model",
            "CRAYFISH_LLM_RETRY_BASE_DELAY": "0.01",
            **(env or {}),
        },
    )
    stack.start()
    try:
        try:
            stack.wait_healthy(timeout=180)
        except Exception:
            _print_logs(root / "logs")
            raise
        yield stack
    finally:
        pids = [p.pid for p in stack.processes.values()]
        stack.stop()
        keep = os.environ.get("CRAYFISH_KEEP_STACK_LOGS")  # a folder to copy the logs into
        if keep:
            shutil.copytree(root / "logs", Path(keep) / root.name, dirs_exist_ok=True)
        shutil.rmtree(root, ignore_errors=True)
    leftovers = [pid for pid in pids if _alive(pid)]
    assert not leftovers, f"services outlived the stack: {leftovers}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _print_logs(folder: Path) -> None:
    for log in sorted(folder.glob("*.log")):
        print(f"----- {log.name} -----\n{log.read_text(errors='replace')[-4000:]}")


def wait_task(
    api: httpx.Client, task_id: str, timeout: float = 60, poll: float = 0.05
) -> dict[str, Any]:
    """The task's final state (`GET /api/tasks/{id}`) once it has ended; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = api.get(f"/api/tasks/{task_id}").json()
        if body["status"] in ("completed", "failed", "cancelled", "interrupted"):
            return body
        time.sleep(poll)
    raise AssertionError(f"task {task_id} did not finish within {timeout} s")


def print_figures(request: pytest.FixtureRequest, lines: list[str]) -> None:
    """Writes a module's figures to the terminal, past pytest's output capture."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if capture is None or reporter is None or not lines:
        return
    with capture.global_and_fixture_disabled():
        for line in lines:
            reporter.write_line(line)


def zip_bytes(files: dict[str, str]) -> bytes:
    """A zip archive of `files` (path inside the archive -> text), e.g. a skill to install."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def sandbox_folder(api: httpx.Client, name: str, timeout: float = 20) -> str:
    """A skill's folder as commands see it, once the skills service knows the sandbox."""
    deadline = time.monotonic() + timeout
    skills: dict[str, Any] = {}
    while time.monotonic() < deadline:
        skills = {s["name"]: s for s in api.get("/api/skills").json()["skills"]}
        if skills.get(name, {}).get("sandbox_folder"):
            return str(skills[name]["sandbox_folder"])
        time.sleep(0.2)
    raise AssertionError(f"{name} never got a sandbox folder: {skills.get(name)}")
