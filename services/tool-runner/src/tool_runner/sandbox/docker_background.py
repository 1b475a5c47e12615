"""A background process under the docker backend: a container of its own that joins the
session container's network namespace.

Its own container is its own cgroup (the sandbox's limits, and nothing it forks outlives its
removal) and is untouched by the `kill -9 -1` that ends each foreground command in the session
container; joining that container's network (`network_mode=container:<id>`, itself `none`)
gives it the session's loopback and nothing else, so the session's commands reach a dev server
it runs. Its stdin, stdout and stderr travel over the engine's attach socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from tool_runner.sandbox.base import Background

# Runs a blocking SDK call in the backend's thread pool.
Call = Callable[..., Awaitable[Any]]
ATTACH = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}


class SocketInput:
    """stdin over the attach socket; writes go through the thread pool (the socket blocks)."""

    def __init__(self, sock: socket.socket, call: Call):
        self.sock = sock
        self.call = call
        self._pending: list[bytes] = []
        self._closed = False

    def write(self, data: bytes) -> None:
        self._pending.append(data)

    async def drain(self) -> None:
        data, self._pending = b"".join(self._pending), []
        if data:
            await self.call(self.sock.sendall, data)

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def is_closing(self) -> bool:
        return self._closed


async def start_in_container(client: Any, call: Call, create: dict[str, Any]) -> Background:
    """Creates the container (`create`: containers.create's arguments), attaches to it before
    it starts (no output is missed), starts it; the handle removes it on kill and release."""
    from docker.utils.socket import frames_iter

    container = await call(client.containers.create, **create)
    try:
        attached = await call(container.attach_socket, params=ATTACH)
        raw: socket.socket = attached._sock  # the SDK's SocketIO wraps the real socket
        await call(container.start)
    except BaseException:
        await call(container.remove, force=True)
        raise
    loop = asyncio.get_running_loop()
    readers = {1: asyncio.StreamReader(), 2: asyncio.StreamReader()}

    def pump() -> None:
        try:
            for stream, data in frames_iter(raw, tty=False):
                if stream in readers and data:
                    loop.call_soon_threadsafe(readers[stream].feed_data, data)
        except OSError:
            pass
        finally:
            for reader in readers.values():
                loop.call_soon_threadsafe(reader.feed_eof)

    pumping = asyncio.ensure_future(call(pump))

    async def wait() -> int:
        await asyncio.shield(pumping)  # the attach stream ends when the container stops
        while True:
            with contextlib.suppress(Exception):  # the SDK's read timeout: ask again
                result = await call(container.wait, timeout=60)
                return int(result.get("StatusCode", -1))

    async def kill() -> None:
        with contextlib.suppress(Exception):
            await call(container.kill)

    async def release() -> None:
        with contextlib.suppress(OSError):
            raw.close()
        with contextlib.suppress(Exception):
            await call(container.remove, force=True)

    return Background(SocketInput(raw, call), readers[1], readers[2], wait, kill, release)
