"""Deleting a session through the REST API closes its sandbox: with docker, its container goes."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, Reply
from tests.stacks import running_stack, wait_task

pytestmark = pytest.mark.docker
DOCKERD = Path(__file__).resolve().parents[2] / "services" / "tool-runner" / "tests" / "dockerd.py"


@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    """The tool-runner tests' private dockerd with their sandbox image; skipped where none runs."""
    spec = importlib.util.spec_from_file_location("tool_runner_test_dockerd", DOCKERD)
    assert spec is not None and spec.loader is not None
    dockerd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dockerd)
    found = dockerd.LocalDockerd.start_or_none()
    if found is None:
        pytest.skip(f"no local Docker engine could start: {dockerd.LocalDockerd.last_reason}")
    yield found
    found.stop()


@pytest.fixture(scope="module")
def docker_stack(fake_llm: FakeLLM, engine: Any) -> Iterator[LocalStack]:
    env = {
        "TOOL_RUNNER_SANDBOX": "docker",
        "TOOL_RUNNER_DOCKER_HOST": engine.host,
        "TOOL_RUNNER_DOCKER_IMAGE": engine.image,
    }
    with running_stack(fake_llm.base_url, env=env) as stack:
        yield stack


def containers(engine: Any, session_id: str) -> list[Any]:
    client = docker.DockerClient(base_url=engine.host)
    return client.containers.list(all=True, filters={"label": f"crayfish.session={session_id}"})


def run_in_sandbox(api: httpx.Client, fake_llm: FakeLLM, session_id: str, command: str) -> str:
    """A turn whose model runs `command` and answers with what the tool returned."""
    fake_llm.reply_tool_calls(("exec", {"command": command}))
    fake_llm.reply_with(
        lambda body: Reply(text=[m for m in body["messages"] if m["role"] == "tool"][-1]["content"])
    )
    body = {"message": f"run {command}", "session_id": session_id}
    task = wait_task(api, api.post("/api/chat", json=body).json()["task_id"])
    assert task["status"] == "completed", task
    return str(task["result"])


def test_deleting_a_session_removes_its_container_and_no_other(
    docker_stack: LocalStack, engine: Any, fake_llm: FakeLLM
):
    with httpx.Client(base_url=docker_stack.url, timeout=60) as api:
        for session_id in ("boat", "garden"):
            run_in_sandbox(api, fake_llm, session_id, f"echo {session_id} > /tmp/mark")
        assert len(containers(engine, "boat")) == len(containers(engine, "garden")) == 1
        assert api.delete("/api/sessions/boat").status_code == 204
        assert containers(engine, "boat") == []
        assert len(containers(engine, "garden")) == 1
        # The other session keeps its sandbox; the deleted id, used again, starts from nothing.
        assert "garden" in run_in_sandbox(api, fake_llm, "garden", "cat /tmp/mark")
        assert "No such file" in run_in_sandbox(api, fake_llm, "boat", "cat /tmp/mark")
