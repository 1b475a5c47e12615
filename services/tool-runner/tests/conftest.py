"""Fixtures: a workspace the sandbox uid can reach and a real tool-runner on a free port."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from crayfish.common.v1 import tools_pb2
from crayfish.tool_runner.v1 import tool_runner_pb2_grpc
from crayfish_common.channels import aio_channel
from tool_runner.config import ToolRunnerSettings
from tool_runner.core import ToolRunnerCore
from tool_runner.server import start_service


@pytest.fixture
def workspace() -> Iterator[Path]:
    """A fresh folder under /tmp (pytest's tmp_path is 0700: the sandbox uid cannot enter it)."""
    path = Path(tempfile.mkdtemp(prefix="crayfish-ws-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def data_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="crayfish-trdata-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def make_settings(workspace: Path, data_dir: Path, **overrides: Any) -> ToolRunnerSettings:
    return ToolRunnerSettings(
        host="127.0.0.1", port=0, workspace=workspace, data_dir=data_dir, **overrides
    )


class Runner:
    """A client of a running tool-runner."""

    def __init__(self, channel: grpc.aio.Channel, workspace: Path, core: ToolRunnerCore):
        self.channel = channel
        self.stub = tool_runner_pb2_grpc.ToolRunnerServiceStub(channel)
        self.workspace = workspace
        self.core = core

    async def run(self, name: str, session: str = "s1", **args: Any) -> tools_pb2.RunToolResponse:
        request = tools_pb2.RunToolRequest(
            name=name, arguments_json=json.dumps(args), session_id=session, call_id="c1"
        )
        return await self.stub.RunTool(request, timeout=120)

    async def sh(self, command: str, **args: Any) -> tools_pb2.RunToolResponse:
        return await self.run("exec", command=command, **args)

    def data(self, reply: tools_pb2.RunToolResponse) -> dict[str, Any]:
        return json.loads(reply.result_json)


async def stop_runner(service: Any, channel: grpc.aio.Channel, client: Runner) -> None:
    await channel.close()
    await service.stop(0)
    await client.core.close()


async def start_runner(workspace: Path, data_dir: Path, **overrides: Any):  # type: ignore[no-untyped-def]
    settings = make_settings(workspace, data_dir, **overrides)
    service, core = await start_service(settings)
    channel = aio_channel(f"127.0.0.1:{service.port}")
    return service, channel, Runner(channel, workspace, core)


async def start_docker_runner(workspace: Path, data_dir: Path, engine: Any, **overrides: Any):  # type: ignore[no-untyped-def]
    """A docker-backend tool-runner on the test engine."""
    return await start_runner(
        workspace,
        data_dir,
        sandbox="docker",
        docker_host=engine.host,
        docker_image=engine.image,
        **overrides,
    )


@pytest.fixture
async def runner(workspace: Path, data_dir: Path) -> AsyncIterator[Runner]:
    """The default (bwrap) tool-runner serving over gRPC on a free loopback port."""
    service, channel, client = await start_runner(workspace, data_dir)
    yield client
    await stop_runner(service, channel, client)


def is_root() -> bool:
    return os.geteuid() == 0


TIGHT_LIMITS = {
    "default_timeout": 10.0,
    "cpu_seconds": 2,
    "memory_mb": 512,
    "max_processes": 64,
    "max_file_mb": 4,
    "tmp_size_mb": 8,
    "output_limit": 10_000,
    "output_kill_bytes": 4 * 1024 * 1024,
}


@pytest.fixture
async def tight(workspace: Path, data_dir: Path) -> AsyncIterator[Runner]:
    """A bwrap tool-runner with small limits, so limit tests finish quickly."""
    service, channel, client = await start_runner(workspace, data_dir, **TIGHT_LIMITS)
    yield client
    await stop_runner(service, channel, client)


def host_processes(marker: str) -> list[int]:
    """Pids of host processes whose command line contains marker."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Any]:
    """A private dockerd with the test sandbox image; skipped, with the reason, where none runs."""
    from .dockerd import LocalDockerd

    engine = LocalDockerd.start_or_none()
    if engine is None:
        pytest.skip(f"no local Docker engine could start: {LocalDockerd.last_reason}")
    yield engine
    engine.stop()


@pytest.fixture
async def docker_tight(
    workspace: Path, data_dir: Path, docker_engine: Any
) -> AsyncIterator[Runner]:
    """A docker-backend tool-runner with small limits on the test engine."""
    service, channel, client = await start_docker_runner(
        workspace, data_dir, docker_engine, **TIGHT_LIMITS
    )
    yield client
    await stop_runner(service, channel, client)
