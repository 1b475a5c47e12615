"""The docker backend's own behaviour: one container per session, hardening, cleanup."""

from __future__ import annotations

import asyncio
import json

import docker
import pytest
from crayfish.common.v1 import tools_pb2
from crayfish.tool_runner.v1 import tool_runner_pb2

from .conftest import start_docker_runner, start_runner, stop_runner

pytestmark = pytest.mark.docker


def containers(engine) -> list:
    return docker.DockerClient(base_url=engine.host).containers.list(all=True)


async def test_one_hardened_container_per_session_removed_on_close(docker_tight, docker_engine):
    first = await docker_tight.run("exec", session="alpha", command="echo $$ > /tmp/mark; id -u")
    again = await docker_tight.run("exec", session="alpha", command="cat /tmp/mark")
    other = await docker_tight.run("exec", session="beta", command="cat /tmp/mark")
    assert first.ok and "65534" in first.output, first.output
    assert again.exit_code == 0 and other.exit_code != 0  # /tmp lives as long as the session
    running = containers(docker_engine)
    assert len(running) == 2
    config = running[0].attrs["HostConfig"]
    assert config["NetworkMode"] == "none" and config["ReadonlyRootfs"]
    assert config["CapDrop"] == ["ALL"] and "no-new-privileges" in config["SecurityOpt"]
    assert config["PidsLimit"] == 64 and config["Memory"] == 512 * 1024 * 1024
    assert running[0].attrs["Config"]["User"] == "65534:65534"
    for session in ("alpha", "beta", "alpha"):
        await docker_tight.stub.CloseSession(
            tool_runner_pb2.CloseSessionRequest(session_id=session)
        )
    assert containers(docker_engine) == []


async def test_idle_sessions_are_removed(workspace, data_dir, docker_engine):
    service, channel, runner = await start_docker_runner(
        workspace, data_dir, docker_engine, docker_idle_seconds=0.5
    )
    try:
        assert (await runner.sh("true")).ok
        assert len(containers(docker_engine)) == 1
        for _ in range(50):
            if not containers(docker_engine):
                break
            await asyncio.sleep(0.1)
        assert containers(docker_engine) == []
        assert (await runner.sh("echo back")).ok  # a new container on demand
    finally:
        await stop_runner(service, channel, runner)
    assert containers(docker_engine) == []


async def test_describe_and_stream_and_files_written_are_shared(docker_tight):
    info = await docker_tight.stub.DescribeSandbox(tool_runner_pb2.DescribeSandboxRequest())
    assert info.backend == "docker" and not info.insecure and "python3" in info.available_bins
    request = tools_pb2.RunToolRequest(
        name="exec",
        session_id="s",
        arguments_json=json.dumps({"command": "for i in 1 2 3; do echo $i; sleep 0.3; done"}),
    )
    events = [e async for e in docker_tight.stub.RunToolStream(request)]
    chunks = [e.chunk.data for e in events if e.WhichOneof("event") == "chunk"]
    assert len(chunks) >= 2 and b"".join(chunks) == b"1\n2\n3\n"
    await docker_tight.sh("echo from-container > made.txt")
    read = await docker_tight.run("read_file", path="made.txt")
    assert read.output == "from-container\n"
    assert (docker_tight.workspace / "made.txt").stat().st_uid == 65534


async def test_refuses_to_start_without_an_engine_or_image(workspace, data_dir, docker_engine):
    from tool_runner.sandbox.base import SandboxUnavailable

    with pytest.raises(SandboxUnavailable, match="cannot reach a Docker engine"):
        await start_runner(
            workspace, data_dir, sandbox="docker", docker_host=f"unix://{data_dir}/nothing.sock"
        )
    with pytest.raises(SandboxUnavailable, match="image nope:1 not found"):
        await start_runner(
            workspace,
            data_dir,
            sandbox="docker",
            docker_host=docker_engine.host,
            docker_image="nope:1",
        )


async def test_a_lost_container_is_replaced(docker_tight, docker_engine):
    assert (await docker_tight.sh("true")).ok
    for container in containers(docker_engine):
        container.remove(force=True)
    reply = await docker_tight.sh("echo again")
    assert reply.ok and "again" in reply.output


async def test_containers_of_others_on_a_shared_engine_are_left_alone(
    workspace, data_dir, docker_engine
):
    """The engine may be shared (the compose override gives the tool-runner the host's): its
    start-up sweep, session close and shutdown remove its own containers only, never another
    runner's session container or an unrelated one. Both run the sandbox image, started with
    testcontainers."""
    from tool_runner.sandbox.docker import DockerSandbox

    from .conftest import make_settings

    # This runner's owner label, as its sandbox computes it, on a container it left behind.
    settings = make_settings(workspace, data_dir, sandbox="docker", docker_host=docker_engine.host)
    owner = DockerSandbox(settings, workspace).owner
    mine = {"crayfish.tool-runner": owner, "crayfish.session": "old"}
    theirs = {"crayfish.tool-runner": "another-runner", "crayfish.session": "s1"}

    def sleeper(labels: dict[str, str] | None) -> object:
        box = docker_engine.container(docker_engine.image, command=["sleep", "600"])
        return box.with_kwargs(network_mode="none", labels=labels)

    with sleeper(theirs) as other, sleeper(None) as unrelated:
        stale = sleeper(mine).start()
        service, channel, runner = await start_docker_runner(
            workspace, data_dir, docker_engine, docker_idle_seconds=600
        )
        try:
            assert (await runner.run("exec", session="s1", command="echo mine")).ok
            await runner.stub.CloseSession(tool_runner_pb2.CloseSessionRequest(session_id="s1"))
            assert (await runner.run("exec", session="s2", command="true")).ok
        finally:
            await stop_runner(service, channel, runner)
        with pytest.raises(docker.errors.NotFound):  # its own leftover went at start-up
            stale.get_wrapped_container().reload()
        for box in (other, unrelated):
            container = box.get_wrapped_container()
            container.reload()
            assert container.status == "running", container.labels
        left = {c.id for c in containers(docker_engine)}
        assert left == {other.get_wrapped_container().id, unrelated.get_wrapped_container().id}
