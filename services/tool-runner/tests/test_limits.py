"""Limits through the real service: timeouts kill the whole tree; CPU, memory, file, output caps."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid

import grpc
from crayfish.common.v1 import tools_pb2

from .conftest import host_processes


def marker() -> str:
    """A unique sleep length to find a process by its command line."""
    return f"{uuid.uuid4().int % 900 + 100}.{uuid.uuid4().int % 10**6:06d}"


async def test_timeout_kills_a_double_forked_setsid_child(tight):
    mark = marker()
    # The grandchild leaves the process group and session, and keeps writing a heartbeat.
    command = (
        f"(setsid sh -c 'while true; do echo x >> beat; sleep 0.05; done & "
        f"exec sleep {mark}' &) ; sleep {mark}"
    )
    reply = await tight.sh(command, timeout=1)
    assert reply.ok and json.loads(reply.result_json)["timed_out"]
    assert "timed out" in reply.output and "process tree was killed" in reply.output
    assert host_processes(mark) == []
    beat = tight.workspace / "beat"
    size = beat.stat().st_size
    await asyncio.sleep(0.3)
    assert beat.stat().st_size == size, "a background writer survived the timeout"


async def gone(mark: str, seconds: float = 10.0) -> list[int]:
    """Host pids still running with `mark` after up to `seconds` (their killing may lag the
    reply by a moment; a stray that survives sleeps for minutes)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    left = host_processes(mark)
    while left and loop.time() < deadline:
        await asyncio.sleep(0.05)
        left = host_processes(mark)
    return left


async def test_background_processes_do_not_outlive_a_finished_command(tight):
    mark = marker()
    # Each stray writes its pid down once it runs; the command ends only after both have.
    command = (
        f"(setsid sh -c 'echo $$ > stray1; exec sleep {mark}' &); "
        f"nohup sh -c 'echo $$ > stray2; exec sleep {mark}' >/dev/null 2>&1 & "
        "until [ -s stray1 ] && [ -s stray2 ]; do sleep 0.01; done; echo started"
    )
    reply = await tight.sh(command)
    assert reply.exit_code == 0 and "started" in reply.output, reply.output
    for name in ("stray1", "stray2"):  # both strays were running when the command ended
        assert (tight.workspace / name).read_text().strip().isdigit()
    assert await gone(mark) == []


async def test_cpu_loop_is_stopped_by_the_cpu_limit(tight):
    reply = await tight.sh("python3 -c 'while True: pass'", timeout=30)
    assert reply.exit_code != 0 and not json.loads(reply.result_json)["timed_out"]
    assert "signal" in reply.output


async def test_memory_hog_gets_memory_error(tight):
    reply = await tight.sh("python3 -c 'x = bytearray(2 * 1024**3); print(len(x))'")
    assert reply.exit_code != 0 and "MemoryError" in reply.output


async def test_file_size_limit(tight):
    reply = await tight.sh("head -c 20000000 /dev/zero > big.bin")
    assert reply.exit_code != 0
    assert (tight.workspace / "big.bin").stat().st_size <= 4 * 1024 * 1024


async def test_tmp_is_small_and_private(tight):
    fill = "for i in 1 2 3 4; do head -c 3000000 /dev/zero > /tmp/f$i || exit 1; done"
    reply = await tight.sh(fill)
    assert reply.exit_code != 0 and "No space left" in reply.output


async def test_fork_bomb_is_contained(tight):
    mark = marker()
    bomb = f"b() {{ sleep {mark} & b & b; }}; b"
    reply = await tight.sh(bomb, timeout=3)
    assert reply.ok
    assert host_processes(mark) == []
    after = await tight.sh("echo still fine")
    assert "still fine" in after.output


async def test_classic_fork_bomb_is_refused_by_policy(tight):
    reply = await tight.sh(":(){ :|:& };:")
    assert not reply.ok and "deny pattern" in reply.output


async def test_giant_output_keeps_head_and_tail_with_a_marker(tight):
    reply = await tight.sh("echo FIRST; seq 1 200000; echo LAST")
    data = json.loads(reply.result_json)
    assert reply.truncated and data["stdout_truncated"] and data["stdout_bytes"] > 1_000_000
    assert (
        reply.output.index("FIRST")
        < reply.output.index("bytes omitted")
        < reply.output.index("LAST")
    )
    assert len(reply.output) < 12_000


async def test_endless_output_is_killed(tight):
    reply = await tight.sh("yes crayfish", timeout=30)
    data = json.loads(reply.result_json)
    assert data["killed"] == "output limit" and not data["timed_out"]
    assert "output passed" in reply.output


async def test_stream_sends_chunks_before_the_result(runner):
    request = tools_pb2.RunToolRequest(
        name="exec",
        arguments_json=json.dumps({"command": "for i in 1 2 3; do echo line$i; sleep 0.3; done"}),
    )
    events = [event async for event in runner.stub.RunToolStream(request)]
    chunks = [e.chunk for e in events if e.WhichOneof("event") == "chunk"]
    assert events[-1].WhichOneof("event") == "result"
    assert len(chunks) >= 2, "output was not streamed while the command ran"
    assert b"".join(c.data for c in chunks) == b"line1\nline2\nline3\n"
    assert events[-1].result.exit_code == 0


async def test_stream_batches_by_size_not_by_line(runner):
    request = tools_pb2.RunToolRequest(
        name="exec", arguments_json=json.dumps({"command": "seq 1 20000"})
    )
    chunks = [
        e.chunk
        async for e in runner.stub.RunToolStream(request)
        if e.WhichOneof("event") == "chunk"
    ]
    data = b"".join(c.data for c in chunks)
    assert data.count(b"\n") == 20000
    assert len(chunks) < 200 and max(len(c.data) for c in chunks) <= 4096


async def test_cancelled_stream_kills_the_command(runner):
    mark = marker()
    request = tools_pb2.RunToolRequest(
        name="exec",
        arguments_json=json.dumps(
            {"command": f"echo go; (setsid sleep {mark} &); sleep {mark}", "timeout": 60}
        ),
    )
    call = runner.stub.RunToolStream(request)
    async for event in call:
        assert event.chunk.data == b"go\n"
        break
    assert host_processes(mark), "the command should be running"
    call.cancel()
    for _ in range(50):
        if not host_processes(mark):
            break
        await asyncio.sleep(0.1)
    assert host_processes(mark) == []


HOLD_ALL_PROCESSES = """
import os, time
n = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    n += 1
open('forked', 'w').write(str(n))
time.sleep(30)
"""


async def test_a_session_at_its_process_limit_does_not_block_another(tight):
    await tight.run("write_file", path="hog.py", content=HOLD_ALL_PROCESSES)
    hog = asyncio.ensure_future(
        tight.run("exec", session="hog", command="python3 hog.py", timeout=8)
    )
    for _ in range(100):
        await asyncio.sleep(0.1)
        if count := await tight.run("read_file", path="forked"):
            if count.ok and count.output:
                break
    assert 0 < int(count.output) < 64, "the hog should stop at its process limit"
    other = await tight.run("exec", session="other", command="sh -c 'echo nested' | cat")
    assert other.exit_code == 0 and "nested" in other.output
    hog.cancel()
    with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
        await hog


async def test_streamed_chunks_never_split_a_utf8_character(runner):
    # 3-byte characters against 4096-byte chunks: most cuts would land mid-character.
    command = "python3 -c \"import sys; sys.stdout.write('龙虾' * 5000)\""
    request = tools_pb2.RunToolRequest(name="exec", arguments_json=json.dumps({"command": command}))
    chunks = [
        e.chunk.data
        async for e in runner.stub.RunToolStream(request)
        if e.WhichOneof("event") == "chunk"
    ]
    assert len(chunks) > 2
    assert "".join(c.decode("utf-8") for c in chunks) == "龙虾" * 5000


async def test_a_call_may_lower_but_not_raise_limits(runner):
    small = await runner.sh("head -c 3000000 /dev/zero > f.bin", limits={"max_file_mb": 1})
    assert small.exit_code != 0 and (runner.workspace / "f.bin").stat().st_size <= 1024 * 1024
    raised = await runner.sh("ulimit -f", limits={"max_file_mb": 10**6})
    assert str(256 * 1024 * 1024 // 512) in raised.output  # still the configured 256 MiB
    bad = await runner.sh("true", limits={"gpu": 1})
    assert not bad.ok and "limits: Additional properties are not allowed ('gpu'" in bad.output
