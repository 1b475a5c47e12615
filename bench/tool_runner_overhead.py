"""Per-command overhead of `exec true` per sandbox backend vs a plain subprocess; 8-session rate.

Run: .venv/bin/python bench/tool_runner_overhead.py [--runs 60] [--pause-ms 30]
     [--backends none,bwrap-cold,bwrap,docker]
`bwrap-cold` is bwrap without warm sandboxes (TOOL_RUNNER_WARM_SANDBOXES=0): each command's
sandbox starts when it arrives. Commands are paced --pause-ms apart, as a turn's commands are by
the LLM request between them (warm sandboxes are refilled in that time); the 8-session rate is
unpaced. The docker backend is measured when a local engine can be started (see its tests).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from crayfish.common.v1 import tools_pb2
from crayfish.tool_runner.v1 import tool_runner_pb2_grpc
from crayfish_common.channels import aio_channel
from tool_runner.config import ToolRunnerSettings
from tool_runner.sandbox.base import ExecSpec
from tool_runner.server import start_service

TESTS = Path(__file__).resolve().parents[1] / "services" / "tool-runner" / "tests"


def stats(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.95) - 1]


async def plain(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = await asyncio.create_subprocess_exec("true")
        await proc.wait()
        times.append((time.perf_counter() - start) * 1000)
    return times


async def measure(
    backend: str, runs: int, extra: dict[str, object], pause: float
) -> dict[str, float]:
    workspace = Path(tempfile.mkdtemp(prefix="crayfish-bench-", dir="/tmp"))
    os.chmod(workspace, 0o755)
    data = Path(tempfile.mkdtemp(prefix="crayfish-bench-data-", dir="/tmp"))
    settings = ToolRunnerSettings(
        host="127.0.0.1", port=0, workspace=workspace, data_dir=data, sandbox=backend, **extra
    )
    service, core = await start_service(settings)
    channel = aio_channel(f"127.0.0.1:{service.port}")
    stub = tool_runner_pb2_grpc.ToolRunnerServiceStub(channel)
    args = json.dumps({"command": "true"})
    try:
        direct, grpc_times = [], []
        for i in range(runs + 3):
            await asyncio.sleep(pause)
            start = time.perf_counter()
            await core.sandbox.run(ExecSpec(command="true", session_id="bench"))
            direct.append((time.perf_counter() - start) * 1000)
            await asyncio.sleep(pause)
            start = time.perf_counter()
            reply = await stub.RunTool(
                tools_pb2.RunToolRequest(name="exec", arguments_json=args, session_id="bench")
            )
            grpc_times.append((time.perf_counter() - start) * 1000)
            assert reply.ok and reply.exit_code == 0, reply.output
            if i < 3:  # warm-up (the docker backend starts the session's container here)
                direct.clear()
                grpc_times.clear()
        rate = await concurrent_rate(stub, args, sessions=8, per_session=max(5, runs // 4))
        return {"direct": direct, "grpc": grpc_times, "rate": rate}  # type: ignore[dict-item]
    finally:
        await channel.close()
        await service.stop(0)
        await core.close()
        shutil.rmtree(workspace, ignore_errors=True)
        shutil.rmtree(data, ignore_errors=True)


async def concurrent_rate(stub, args: str, sessions: int, per_session: int) -> float:  # type: ignore[no-untyped-def]
    async def one(session: str) -> None:
        for _ in range(per_session):
            await stub.RunTool(
                tools_pb2.RunToolRequest(name="exec", arguments_json=args, session_id=session)
            )

    for s in range(sessions):  # start each session's container (docker) before timing
        await stub.RunTool(
            tools_pb2.RunToolRequest(name="exec", arguments_json=args, session_id=f"s{s}")
        )
    start = time.perf_counter()
    await asyncio.gather(*(one(f"s{s}") for s in range(sessions)))
    return sessions * per_session / (time.perf_counter() - start)


def docker_settings() -> tuple[dict[str, object], object | None]:
    sys.path.insert(0, str(TESTS))
    from dockerd import LocalDockerd  # type: ignore[import-not-found]

    engine = LocalDockerd.start_or_none()
    if engine is None:
        return {}, None
    return {"docker_host": engine.host, "docker_image": engine.image}, engine


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--pause-ms", type=float, default=30.0)
    parser.add_argument("--backends", default="none,bwrap-cold,bwrap,docker")
    opts = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    base_med, base_p95 = stats(await plain(opts.runs))
    print(f"plain subprocess `true`: median {base_med:.2f} ms, p95 {base_p95:.2f} ms")
    print(
        f"{'backend':10} {'path':6} {'median ms':>10} {'p95 ms':>8} {'x plain':>8}  "
        "8 sessions cmd/s"
    )
    for backend in opts.backends.split(","):
        extra: dict[str, object] = {}
        if backend == "bwrap-cold":
            extra["warm_sandboxes"] = 0
        engine = None
        if backend == "docker":
            extra, engine = docker_settings()
            if engine is None:
                print("docker     (skipped: no local Docker engine could start)")
                continue
        try:
            sandbox = backend.removesuffix("-cold")
            result = await measure(sandbox, opts.runs, extra, opts.pause_ms / 1000)
        finally:
            if engine is not None:
                engine.stop()  # type: ignore[attr-defined]
        for path in ("direct", "grpc"):
            med, p95 = stats(result[path])  # type: ignore[arg-type]
            rate = f"{result['rate']:.1f}" if path == "grpc" else ""
            print(f"{backend:10} {path:6} {med:10.2f} {p95:8.2f} {med / base_med:8.1f}  {rate}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
