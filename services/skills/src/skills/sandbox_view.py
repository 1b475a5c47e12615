"""Where commands run, for skills: the tool-runner's sandbox (its executables, the names of the
environment variables commands get, the skill folders it mounts), else the local PATH."""

from __future__ import annotations

import logging
import time

import grpc
from crayfish.tool_runner.v1 import tool_runner_pb2, tool_runner_pb2_grpc
from crayfish_common.channels import aio_channel

from skills.gating import SandboxView

log = logging.getLogger(__name__)


UNKNOWN_ENV = "env requirements unknown, shown as missing"


class SandboxViewSource:
    """Asks the tool-runner's DescribeSandbox (cached); falls back to the local PATH, saying why.

    `env:` requirements are met only by variables the sandbox passes to every command. When
    the tool-runner cannot say (unreachable, or too old to report names), they count as missing:
    this service's own environment never reaches a command. Only without a tool-runner at all
    does this service's environment decide."""

    def __init__(self, address: str, cache_seconds: float = 60.0, retry_seconds: float = 5.0):
        self.address = address
        self.cache_seconds = cache_seconds
        self.retry_seconds = retry_seconds
        self._view = SandboxView("local PATH and environment (SKILLS_TOOL_RUNNER_ADDR not set)")
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
            reason = f"tool-runner {self.address} unreachable: {exc.code().name}; {UNKNOWN_ENV}"
            return SandboxView(f"local PATH ({reason})", env_names=frozenset()), self.retry_seconds
        env_names = frozenset(reply.env_names)
        unknown_env = "" if env_names else f"; {UNKNOWN_ENV}"
        if not reply.available_bins:
            reason = f"tool-runner {self.address} reported no bins{unknown_env}"
            view = SandboxView(f"local PATH ({reason})", env_names=env_names)
            return view, self.retry_seconds
        source = f"tool-runner {self.address} ({reply.backend} sandbox{unknown_env})"
        folders = dict(reply.skill_roots)
        if reply.workspace_path:
            folders["workspace"] = reply.workspace_path.rstrip("/") + "/skills"
        view = SandboxView(
            source, frozenset(reply.available_bins), folders, env_names, skill_secrets(reply)
        )
        return view, self.cache_seconds

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None


def skill_secrets(reply: tool_runner_pb2.DescribeSandboxResponse) -> dict[str, frozenset[str]]:
    """Skill -> the secrets (names) bound to it in the tool-runner's secrets file."""
    by_skill: dict[str, set[str]] = {}
    for secret in reply.skill_secrets:
        for skill in secret.skills:
            by_skill.setdefault(skill, set()).add(secret.name)
    return {skill: frozenset(names) for skill, names in by_skill.items()}
