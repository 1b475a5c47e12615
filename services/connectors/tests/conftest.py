"""Fixtures: real MCP servers (the toy server over stdio, streamable HTTP and SSE on loopback),
a config file writer, and a real connectors gRPC server."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from connectors.config import ConnectorsSettings
from connectors.core import ConnectorsCore
from connectors.server import start_service
from crayfish.connectors.v1 import connectors_pb2_grpc
from crayfish_common.channels import aio_channel

TOY_SERVER = Path(__file__).resolve().parent / "mcp_servers" / "toy_server.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stdio_entry(**extra: Any) -> dict[str, Any]:
    """A config entry that runs the toy server as a child process."""
    return {"command": sys.executable, "args": [str(TOY_SERVER)], **extra}


@dataclass
class HttpToy:
    """The toy server as its own process on a loopback port; restartable on the same port."""

    transport: str
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        path = "/sse" if self.transport == "sse" else "/mcp"
        return f"http://127.0.0.1:{self.port}{path}"

    def entry(self, **extra: Any) -> dict[str, Any]:
        return {"url": self.url, "transport": self.transport, **extra}

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(TOY_SERVER), self.transport, str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"toy server exited with {self.process.returncode}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError("toy server did not listen within 20 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def http_toy() -> Iterator[Callable[[str], HttpToy]]:
    """http_toy("streamable-http" | "sse") starts one; all are stopped at the end."""
    started: list[HttpToy] = []

    def start(transport: str) -> HttpToy:
        toy = HttpToy(transport, free_port())
        toy.start()
        started.append(toy)
        return toy

    yield start
    for toy in started:
        toy.stop()


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[dict[str, Any]], Path]:
    """write_config({name: entry}) → the path of an mcpServers file outside the workspace."""

    def write(servers: dict[str, Any]) -> Path:
        path = tmp_path / "config" / "mcp.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps({"mcpServers": servers}))
        return path

    return write


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., ConnectorsSettings]:
    (tmp_path / "workspace").mkdir()

    def make(mcp_config: Path | None = None, **overrides: Any) -> ConnectorsSettings:
        values: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": 0,
            "workspace": tmp_path / "workspace",
            "mcp_config": mcp_config,
            "mcp_connect_timeout": 20.0,
            "mcp_backoff_min": 0.2,
            "mcp_backoff_max": 1.0,
            "web_fetch_allow": "",
            # No web_search unless a test configures it (the environment may name a provider).
            "web_search_provider": "",
            "web_search_url": "",
            "web_search_api_key": "",
        }
        values.update(overrides)
        return ConnectorsSettings(**values)

    return make


@pytest.fixture
async def make_core() -> AsyncIterator[Callable[[ConnectorsSettings], Any]]:
    """make_core(settings) → a started ConnectorsCore, stopped at the end."""
    cores: list[ConnectorsCore] = []

    async def make(settings: ConnectorsSettings) -> ConnectorsCore:
        core = ConnectorsCore(settings)
        cores.append(core)
        await core.start()
        return core

    yield make
    for core in cores:
        await core.stop()


@dataclass
class Served:
    stub: connectors_pb2_grpc.ConnectorsServiceStub
    core: ConnectorsCore
    port: int


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[ConnectorsSettings], Any]]:
    """serve(settings) → a real connectors gRPC server on a free port, and a stub for it."""
    running: list[tuple[Any, ConnectorsCore, Any]] = []

    async def start(settings: ConnectorsSettings) -> Served:
        service, core = await start_service(settings)
        channel = aio_channel(f"127.0.0.1:{service.port}")
        running.append((service, core, channel))
        return Served(connectors_pb2_grpc.ConnectorsServiceStub(channel), core, service.port)

    yield start
    for service, core, channel in running:
        await channel.close()
        await service.stop(0)
        await core.stop()


async def wait_for(predicate: Callable[[], bool], limit: float = 20.0) -> None:
    """Polls until the predicate holds (a server reconnecting, a list refreshing)."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)
