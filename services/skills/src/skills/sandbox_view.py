"""Where commands run, for skills: the tool-runner's sandbox (its executables and the skill
folders it mounts), else the local PATH."""

from __future__ import annotations

import logging
import time

import grpc
from crayfish.tool_runner.v1 import tool_runner_pb2, tool_runner_pb2_grpc
from crayfish_common.channels import aio_channel

from skills.gating import SandboxView

log = logging.getLogger(__name__)


class SandboxViewSource:
    """Asks the tool-runner's DescribeSandbox (cached); falls back to the local PATH, saying why."""

    def __init__(self, address: str, cache_seconds: float = 60.0, retry_seconds: float = 5.0):
        self.address = address
        self.cache_seconds = cache_seconds
        self.retry_seconds = retry_seconds
        self._view = SandboxView("local PATH (SKILLS_TOOL_RUNNER_ADDR not set)")
        self._expires = 0.0 if address else float("inf")
        self._channel: grpc.aio.Channel | None = None

    async def view(self) -> SandboxView:
        if time.monotonic() < self._expires:
            return self._view
        view, ttl = await self._ask()
        if view.key != self._view.key:
            log.info("bin requirements now checked against %s", view.source)
            self._view = view
        self._expires = time.monotonic() + ttl
        return self._view

    async def _ask(self) -> tuple[SandboxView, float]:
        if self._channel is None:
            self._channel = aio_channel(self.address)
        stub = tool_runner_pb2_grpc.ToolRunnerServiceStub(self._channel)
        try:
            reply = await stub.DescribeSandbox(tool_runner_pb2.DescribeSandboxRequest(), timeout=3)
        except grpc.aio.AioRpcError as exc:
            reason = f"tool-runner {self.address} unreachable: {exc.code().name}"
            return SandboxView(f"local PATH ({reason})"), self.retry_seconds
        if not reply.available_bins:
            reason = f"tool-runner {self.address} reported no bins"
            return SandboxView(f"local PATH ({reason})"), self.retry_seconds
        source = f"tool-runner {self.address} ({reply.backend} sandbox)"
        folders = dict(reply.skill_roots)
        if reply.workspace_path:
            folders["workspace"] = reply.workspace_path.rstrip("/") + "/skills"
        view = SandboxView(source, frozenset(reply.available_bins), folders)
        return view, self.cache_seconds

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
