"""docker-compose.docker-sandbox.yml: the tool-runner gets the engine's socket and runs each
session's commands in a container from crayfish-sandbox:latest (what `make images` built)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from crayfish.common.v1 import tools_pb2
from crayfish.tool_runner.v1 import tool_runner_pb2, tool_runner_pb2_grpc

from tests.compose.stack import (
    DOCKER_SANDBOX,
    MAIN,
    TEST,
    Compose,
    compose_binary,
    compose_env,
    container,
    free_port,
    proc_status,
    tagged,
    wait_healthy,
)

pytestmark = pytest.mark.compose
PROBE = """
echo "uid=$(id -u)"
echo "host=$(hostname)"
echo "interfaces=$(awk -F: 'NR > 2 {gsub(/ /, "", $1); print $1}' /proc/net/dev | tr '\\n' ,)"
touch /usr/escape 2>/dev/null && echo usr=writable || echo usr=readonly
echo "docker_socket=$(test -e /var/run/docker.sock && echo present || echo absent)"
echo from-a-container > /workspace/docker.txt && echo workspace=writable
"""


@pytest.fixture(scope="module")
def runner(engine: Any, docker_client: Any, images: list[str]) -> Iterator[tuple[Compose, int]]:
    root = Path(tempfile.mkdtemp(prefix="crayfish-compose-docker-", dir="/tmp"))
    (root / "workspace").mkdir()
    (root / "empty.env").touch()
    port = free_port()
    env = compose_env(
        {
            "DOCKER_HOST": engine.host,
            "DOCKER_SOCKET": str(engine.socket),
            "DOCKER_GID": str(engine.socket.stat().st_gid),
            "CRAYFISH_API_TOKEN": "unused",
            "CRAYFISH_WORKSPACE": str(root / "workspace"),
            "E2E_TOOL_RUNNER_PORT": str(port),
            "E2E_SKILLS_PORT": str(free_port()),
        }
    )
    files = [MAIN, TEST, DOCKER_SANDBOX]
    compose = Compose("crayfish-docker", files, env, root / "empty.env", compose_binary())
    compose("up", "--detach", "--no-build", "--pull", "never", "tool-runner")
    try:
        wait_healthy(docker_client, compose.project, ("tool-runner",))
        yield compose, port
    finally:
        try:
            compose("down", "--volumes", "--timeout", "10")
        finally:
            shutil.rmtree(root, ignore_errors=True)


def test_commands_run_in_a_hardened_container_of_the_sandbox_image(
    runner: tuple[Compose, int], docker_client: Any
):
    compose, port = runner
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = tool_runner_pb2_grpc.ToolRunnerServiceStub(channel)
        described = stub.DescribeSandbox(tool_runner_pb2.DescribeSandboxRequest(), timeout=30)
        assert described.backend == "docker" and not described.insecure
        request = tools_pb2.RunToolRequest(
            name="exec", arguments_json=json.dumps({"command": PROBE}), session_id="d1"
        )
        reply = stub.RunTool(request, timeout=120)
    assert reply.ok, reply.output
    probe = tagged(reply.output)
    assert probe["uid"] == "10001" and probe["host"] == "sandbox"
    assert probe["interfaces"] == "lo,"
    assert probe["usr"] == "readonly" and probe["docker_socket"] == "absent"
    assert probe["workspace"] == "writable"
    [session] = docker_client.containers.list(filters={"label": "crayfish.session=d1"})
    assert session.image.tags == ["crayfish-sandbox:latest"]
    host = session.attrs["HostConfig"]
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and "no-new-privileges" in host["SecurityOpt"]
    # The tool-runner itself keeps Docker's seccomp filter and /proc masking in this mode.
    box = container(docker_client, compose.project, "tool-runner")
    assert box.attrs["HostConfig"]["SecurityOpt"] == ["no-new-privileges:true"]
    assert box.attrs["HostConfig"]["MaskedPaths"]
    assert proc_status(box.attrs["State"]["Pid"])["Seccomp"] == "2"
    # Stopping the tool-runner removes the session containers it made.
    compose("stop", "tool-runner")
    assert not docker_client.containers.list(all=True, filters={"label": "crayfish.session=d1"})
