"""The orchestrator's clients of its three services, built once from settings."""

from __future__ import annotations

import asyncio

from orchestrator.clients.health import DependencyState
from orchestrator.clients.memory import MemoryClient
from orchestrator.clients.skills import SkillsClient
from orchestrator.clients.tool_runner import ToolRunnerClient
from orchestrator.clients.tool_service import ToolServiceClient
from orchestrator.config import Settings


class ServiceClients:
    """One client (and channel) per service; `tool_services` are the ones that offer tools."""

    def __init__(self, settings: Settings):
        self.tool_runner = ToolRunnerClient(settings.tool_runner_addr, settings.rpc_timeout)
        self.memory = MemoryClient(settings.memory_addr, settings.rpc_timeout)
        self.skills = SkillsClient(settings.skills_addr, settings.rpc_timeout)

    @property
    def tool_services(self) -> list[ToolServiceClient]:
        return [self.tool_runner, self.memory, self.skills]

    async def dependency_states(self) -> list[DependencyState]:
        return list(await asyncio.gather(*(c.health() for c in self.tool_services)))

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.tool_services))
