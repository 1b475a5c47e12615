"""Background processes under the docker backend: a container of their own in the session
container's network; reached by the session's commands, followed, killed, and nothing left."""

from __future__ import annotations

import asyncio

import docker
import pytest

from .test_background import free_port, poll_until, process, start
from .test_limits import gone, marker

pytestmark = pytest.mark.docker


def process_containers(engine) -> list:
    client = docker.DockerClient(base_url=engine.host)
    return client.containers.list(all=True, filters={"label": "crayfish.process=1"})


async def test_dev_server_in_its_own_container_on_the_sessions_loopback(
    docker_tight, docker_engine
):
    port = free_port()
    (docker_tight.workspace / "page.txt").write_text("served-by-docker\n")
    first = await start(docker_tight, f"python3 -u -m http.server {port} --bind 127.0.0.1")
    pid = first["process_id"]
    assert first["status"] == "running", first
    [container] = process_containers(docker_engine)
    config = container.attrs["HostConfig"]
    assert config["NetworkMode"].startswith("container:") and config["ReadonlyRootfs"]
    assert config["CapDrop"] == ["ALL"] and config["PidsLimit"] == 64
    fetch = (
        'python3 -c "import urllib.request as u; '
        f"print(u.urlopen('http://127.0.0.1:{port}/page.txt').read().decode())\""
    )
    # Each foreground command ends with kill -9 -1 in the session container: the server,
    # in its own container, is untouched.
    for _ in range(2):
        reply = await docker_tight.sh(fetch)
        assert reply.exit_code == 0 and "served-by-docker" in reply.output, reply.output
    await poll_until(docker_tight, pid, "GET /page.txt", seen=first["output_tail"])
    other = await docker_tight.run("exec", "s2", command=fetch)
    assert other.exit_code != 0  # another session's loopback
    killed = await process(docker_tight, "kill", process_id=pid)
    assert docker_tight.data(killed)["status"] == "killed", killed.output
    assert process_containers(docker_engine) == []
    assert (await docker_tight.sh(fetch)).exit_code != 0


async def test_write_eof_exit_code_and_a_forked_daemon_dies_with_it(docker_tight, docker_engine):
    mark = marker()
    command = f"(setsid sh -c 'exec sleep {mark}' &); read a; echo got $a; exit 5"
    data = await start(docker_tight, command)
    pid = data["process_id"]
    assert await gone(mark, 0), "the daemon never ran"
    assert (await process(docker_tight, "write", process_id=pid, data="hello\n", eof=True)).ok
    seen = await poll_until(docker_tight, pid, "got hello")
    for _ in range(100):
        state = docker_tight.data(await process(docker_tight, "poll", process_id=pid))
        if state["status"] != "running":
            break
        await asyncio.sleep(0.1)
    assert state["status"] == "exited" and state["exit_code"] == 5, (state, seen)
    assert await gone(mark) == []
    assert process_containers(docker_engine) == []


async def test_closing_the_session_removes_its_process_containers(docker_tight, docker_engine):
    mark = marker()
    await start(docker_tight, f"sleep {mark}")
    await start(docker_tight, f"sleep {mark}")
    assert len(process_containers(docker_engine)) == 2
    await docker_tight.core.close_session("s1")
    assert process_containers(docker_engine) == []
    assert await gone(mark) == []
