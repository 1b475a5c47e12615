"""Background processes through the real service and the bwrap sandbox: exec with background
or yield_ms, the process tool, a dev server on the session's loopback, forks, limits, owners."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from typing import Any

import pytest

from .conftest import TIGHT_LIMITS, Runner, is_root, start_runner, stop_runner
from .test_limits import gone, marker

pytestmark = pytest.mark.skipif(not is_root(), reason="the session's loopback needs root")


@pytest.fixture
async def bg(workspace, data_dir):
    service, channel, client = await start_runner(
        workspace, data_dir, **TIGHT_LIMITS, max_processes_per_session=3
    )
    yield client
    await stop_runner(service, channel, client)


async def start(runner: Runner, command: str, session: str = "s1", **args: Any) -> dict[str, Any]:
    reply = await runner.run("exec", session, command=command, background=True, **args)
    assert reply.ok, reply.output
    return runner.data(reply)


async def process(runner: Runner, action: str, session: str = "s1", **args: Any) -> Any:
    return await runner.run("process", session, action=action, **args)


async def poll_until(
    runner: Runner, pid: str, text: str, session: str = "s1", seen: str = ""
) -> str:
    """Polls until `text` shows in the output read so far (`seen`, then each poll's new
    output; 20 s at most); returns it all."""
    for _ in range(200):
        reply = await process(runner, "poll", session, process_id=pid)
        assert reply.ok, reply.output
        seen += runner.data(reply)["output"]
        if text in seen:
            return seen
        await asyncio.sleep(0.1)
    raise AssertionError(f"{text!r} never came; output: {seen!r}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_dev_server_in_the_background_is_reached_polled_written_to_and_killed(bg):
    port = free_port()
    # The server also echoes what it reads on stdin to its log, so `write` can be seen.
    script = (
        "import http.server, sys, threading\n"
        f"s = http.server.HTTPServer(('127.0.0.1', {port}), http.server.SimpleHTTPRequestHandler)\n"
        "threading.Thread(target=s.serve_forever, daemon=True).start()\n"
        "print('serving', flush=True)\n"
        "for line in sys.stdin: print('stdin:', line.strip(), flush=True)\n"
        "print('stdin closed', flush=True)\n"
        "s.shutdown()\n"
    )
    (bg.workspace / "serve.py").write_text(script)
    (bg.workspace / "hello.txt").write_text("hello from the workspace\n")
    first = await start(bg, "python3 -u serve.py")
    assert first["status"] == "running" and first["process_id"].startswith("p")
    pid = first["process_id"]
    await poll_until(bg, pid, "serving", seen=first["output_tail"])
    # Another command of the session reaches it on the sandbox's loopback.
    fetch = f"python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}/hello.txt').read().decode())\""
    reply = await bg.sh(fetch)
    assert reply.exit_code == 0 and "hello from the workspace" in reply.output, reply.output
    log = await poll_until(bg, pid, "GET /hello.txt")
    assert "200" in log
    # The host's loopback does not see it.
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
    # Another session's commands do not reach it, nor see it.
    other = await bg.run("exec", "s2", command=fetch)
    assert other.exit_code != 0
    assert "no background process" in (await process(bg, "poll", "s2", process_id=pid)).output
    listed = bg.data(await process(bg, "list", "s2"))
    assert listed["processes"] == []
    # write reaches stdin
    assert (await process(bg, "write", process_id=pid, data="one\ntwo\n")).ok
    await poll_until(bg, pid, "stdin: two")
    killed = await process(bg, "kill", process_id=pid)
    assert killed.ok and bg.data(killed)["status"] == "killed", killed.output
    # log keeps the lines
    log_reply = await process(bg, "log", process_id=pid, limit=50)
    assert "serving" in log_reply.output and "stdin: one" in log_reply.output
    gone_reply = await bg.sh(fetch)
    assert gone_reply.exit_code != 0


async def test_write_with_eof_ends_a_reader_and_its_exit_code_is_polled(bg):
    first = await start(bg, "read a; read b; echo got $a $b; exit 3")
    pid = first["process_id"]
    reply = await process(bg, "write", process_id=pid, data="x\n")
    assert reply.ok
    reply = await process(bg, "write", process_id=pid, data="y", eof=True)
    assert reply.ok
    for _ in range(100):
        data = bg.data(await process(bg, "poll", process_id=pid))
        if data["status"] != "running":
            break
        await asyncio.sleep(0.1)
    assert data["status"] == "exited" and data["exit_code"] == 3
    assert "got x y" in bg.data(await process(bg, "log", process_id=pid))["lines"]


async def test_a_quick_command_answers_with_its_end_not_an_id(bg):
    data = await start(bg, "echo done; exit 4", yield_ms=5000)
    assert data["status"] == "exited" and data["exit_code"] == 4
    assert "done" in data["output_tail"]


async def test_yield_ms_leaves_a_long_command_running(bg):
    reply = await bg.run("exec", "s1", command="echo begun; sleep 30", yield_ms=300)
    data = bg.data(reply)
    assert data["status"] == "running" and "begun" in data["output_tail"]
    await process(bg, "kill", process_id=data["process_id"])


async def test_a_daemon_it_forks_dies_with_it(bg):
    mark = marker()
    command = (
        f"(setsid sh -c 'echo $$ > daemon.pid; exec sleep {mark}' &); "
        f"nohup sleep {mark} >/dev/null 2>&1 & "
        "until [ -s daemon.pid ]; do sleep 0.01; done; echo forked; sleep 600"
    )
    data = await start(bg, command)
    await poll_until(bg, data["process_id"], "forked", seen=data["output_tail"])
    assert len(await gone(mark, 0)) >= 2  # the daemons run
    await process(bg, "kill", process_id=data["process_id"])
    assert await gone(mark) == []
    # And when the process ends by itself, what it forked ends too.
    mark = marker()
    data = await start(
        bg,
        f"(setsid sh -c 'echo $$ > d2.pid; exec sleep {mark}' &); "
        "until [ -s d2.pid ]; do sleep 0.01; done; echo forked",
        yield_ms=5000,
    )
    assert data["status"] == "exited"
    assert await gone(mark) == []


async def test_a_background_process_has_no_network(bg):
    port = free_port()
    connect = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        data = await start(bg, connect, yield_ms=10000)
        assert data["status"] == "exited" and data["exit_code"] != 0
        assert "Connection refused" in data["output_tail"] or "Errno" in data["output_tail"]
        # Nor the session's foreground commands, which share its namespace meanwhile.
        await start(bg, f"sleep {marker()}")
        reply = await bg.sh(connect)
        assert reply.exit_code != 0 and "Connection refused" in reply.output, reply.output
        names = 'python3 -c "import socket; print([n for _, n in socket.if_nameindex()])"'
        reply = await bg.sh(names)
        assert reply.exit_code == 0 and "['lo']" in reply.output, reply.output


async def test_processes_per_session_are_capped_and_other_sessions_are_not(bg):
    ids = [(await start(bg, f"sleep {marker()}"))["process_id"] for _ in range(3)]
    refused = await bg.run("exec", "s1", command="sleep 5", background=True)
    assert not refused.ok and "3 background processes" in refused.output
    other = await start(bg, f"sleep {marker()}", session="s2")
    assert other["status"] == "running"
    await process(bg, "kill", process_id=ids[0])
    again = await start(bg, f"sleep {marker()}")
    assert again["status"] == "running"


async def test_closing_the_session_kills_its_processes(bg):
    mark = marker()
    await start(bg, f"sleep {mark}")
    await start(bg, f"sleep {mark}")
    assert len(await gone(mark, 0)) >= 2  # (bwrap and sh carry the mark too)
    await bg.core.close_session("s1")
    assert await gone(mark) == []
    assert bg.data(await process(bg, "list"))["processes"] == []


async def test_idle_timeout_and_maximum_lifetime_kill(workspace, data_dir):
    service, channel, client = await start_runner(
        workspace, data_dir, process_idle_seconds=1.5, process_max_seconds=60
    )
    try:
        data = await start(client, f"sleep {marker()}")
        await asyncio.sleep(4)
        rows = client.data(await process(client, "list"))["processes"]
        assert [(r["status"], r["reason"]) for r in rows] == [("killed", "idle timeout")]
    finally:
        await stop_runner(service, channel, client)
    service, channel, client = await start_runner(
        workspace, data_dir, process_idle_seconds=600, process_max_seconds=1.5
    )
    try:
        data = await start(client, f"sleep {marker()}")
        await asyncio.sleep(4)
        reply = await process(client, "poll", process_id=data["process_id"])
        assert client.data(reply)["reason"] == "max lifetime", reply.output
    finally:
        await stop_runner(service, channel, client)


async def test_unknown_actions_and_ids_are_clear_results(bg):
    reply = await process(bg, "poll")
    assert not reply.ok and "process_id is required" in reply.output
    reply = await process(bg, "kill", process_id=f"p{uuid.uuid4().hex[:12]}")
    assert not reply.ok and "no background process" in reply.output
    reply = await bg.run("process", "s1", action="explode")
    assert not reply.ok
    assert json.loads(reply.result_json or "{}") is not None


async def test_the_sandboxs_limits_hold_for_a_background_process(bg):
    # TIGHT_LIMITS: 512 MB of memory, 2 s of CPU.
    hog = "python3 -c \"x = bytearray(800 * 1024 * 1024); print('allocated')\""
    data = await start(bg, hog, yield_ms=20000)
    assert data["status"] == "exited" and data["exit_code"] != 0
    assert "MemoryError" in data["output_tail"] and "allocated" not in data["output_tail"]
    spin = await start(bg, "while :; do :; done", yield_ms=20000)
    assert spin["status"] == "exited" and spin["exit_code"] > 128, spin  # SIGXCPU/SIGKILL
