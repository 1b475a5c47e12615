"""A tool-runner killed with background processes running: none is left behind, and the next
runner on the same data folder reports them `lost` (and tells watchers of those that asked)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time

import pytest
from crayfish.common.v1 import tools_pb2
from crayfish.tool_runner.v1 import tool_runner_pb2, tool_runner_pb2_grpc
from crayfish_common.channels import aio_channel
from crayfish_common.healthcheck import check
from tool_runner.servicer import SERVICE_NAME

from devstack.launcher import free_port

from .conftest import host_processes, is_root
from .test_limits import gone, marker
from .test_startup import _env

pytestmark = pytest.mark.skipif(not is_root(), reason="per-process cgroups need root")


def serve(workspace, data_dir, port: int, **env: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tool_runner"], env=_env(workspace, data_dir, port, **env)
    )
    deadline = time.monotonic() + 30
    while not check(f"127.0.0.1:{port}", SERVICE_NAME, timeout=0.5):
        assert proc.poll() is None and time.monotonic() < deadline, "the runner did not start"
        time.sleep(0.1)
    return proc


async def call(stub, name: str, session: str = "s1", **args) -> dict:
    request = tools_pb2.RunToolRequest(
        name=name, arguments_json=json.dumps(args), session_id=session, call_id="c1"
    )
    reply = await stub.RunTool(request, timeout=60)
    assert reply.ok, reply.output
    return json.loads(reply.result_json)


async def test_a_killed_runner_leaves_no_process_and_the_next_reports_them_lost(
    workspace, data_dir
):
    port = free_port()
    runner = serve(workspace, data_dir, port)
    mark = marker()
    try:
        async with aio_channel(f"127.0.0.1:{port}") as channel:
            stub = tool_runner_pb2_grpc.ToolRunnerServiceStub(channel)
            plain = await call(stub, "exec", command=f"sleep {mark}", background=True)
            forking = await call(
                stub,
                "exec",
                command=f"(setsid sh -c 'echo $$ > d.pid; exec sleep {mark}' &); "
                f"until [ -s d.pid ]; do sleep 0.01; done; exec sleep {mark}",
                background=True,
                notify_on_exit=True,
            )
            assert plain["status"] == forking["status"] == "running"
            running = await gone(mark, 0)
            assert len(running) >= 3  # both sleeps and the daemon, under their sandboxes
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    left = await gone(mark)
    print(f"processes left after the tool-runner was killed: {len(left)}")
    assert left == []

    port = free_port()
    runner = serve(workspace, data_dir, port)
    try:
        async with aio_channel(f"127.0.0.1:{port}") as channel:
            stub = tool_runner_pb2_grpc.ToolRunnerServiceStub(channel)
            listed = (await call(stub, "process", action="list"))["processes"]
            assert {(p["process_id"], p["status"]) for p in listed} == {
                (plain["process_id"], "lost"),
                (forking["process_id"], "lost"),
            }
            assert (await call(stub, "process", "s2", action="list"))["processes"] == []
            ends = stub.WatchProcesses(tool_runner_pb2.WatchProcessesRequest(), timeout=30)
            end = await asyncio.wait_for(ends.read(), 20)
            assert (end.process_id, end.session_id, end.status) == (
                forking["process_id"],
                "s1",
                "lost",
            )  # only the one that asked for a notice
            ends.cancel()
    finally:
        runner.terminate()
        assert runner.wait(timeout=20) == 0
    assert host_processes(mark) == []


@pytest.mark.docker
async def test_docker_a_killed_runners_process_containers_go_at_its_restart(
    workspace, data_dir, docker_engine
):
    """With docker, containers do not die with the runner (no --die-with-parent across the
    engine): they are left until a runner with the same owner starts, which removes them and
    reports the processes lost."""
    import docker

    engine = docker.DockerClient(base_url=docker_engine.host)

    def left() -> list:
        return engine.containers.list(all=True, filters={"label": "crayfish.process=1"})

    env = {
        "TOOL_RUNNER_SANDBOX": "docker",
        "TOOL_RUNNER_DOCKER_HOST": docker_engine.host,
        "TOOL_RUNNER_DOCKER_IMAGE": docker_engine.image,
    }
    port = free_port()
    runner = serve(workspace, data_dir, port, **env)
    try:
        async with aio_channel(f"127.0.0.1:{port}") as channel:
            stub = tool_runner_pb2_grpc.ToolRunnerServiceStub(channel)
            started = await call(stub, "exec", command=f"sleep {marker()}", background=True)
            assert started["status"] == "running" and len(left()) == 1
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    print(f"docker: process containers left while no runner runs: {len(left())}")
    runner = serve(workspace, data_dir, port, **env)  # the same owner: same port and folders
    try:
        print(f"docker: process containers left once it restarted: {len(left())}")
        assert left() == []
        async with aio_channel(f"127.0.0.1:{port}") as channel:
            stub = tool_runner_pb2_grpc.ToolRunnerServiceStub(channel)
            listed = (await call(stub, "process", action="list"))["processes"]
            assert [(p["process_id"], p["status"]) for p in listed] == [
                (started["process_id"], "lost")
            ]
    finally:
        runner.terminate()
        assert runner.wait(timeout=30) == 0
