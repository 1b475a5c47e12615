"""The orchestrator's clients of its services, built once from settings: the three built-in
ones, the connectors service when CONNECTORS_ADDR is set, and CRAYFISH_TOOL_SERVICES."""

from __future__ import annotations

import asyncio

from orchestrator.clients.health import DependencyState
from orchestrator.clients.memory import MemoryClient
from orchestrator.clients.skills import SkillsClient
from orchestrator.clients.tool_runner import ToolRunnerClient
from orchestrator.clients.tool_service import (
    CONNECTORS_GRPC_SERVICE,
    TOOL_SERVICE_GRPC_SERVICE,
    ToolServiceClient,
)
from orchestrator.config import Settings


class ServiceClients:
    """One client (and channel) per service; `tool_services` are the ones that offer tools,
    in the order their tools win a name clash: built-in, connectors, then custom as listed.

    The health check of the connectors and custom services asks about the whole server (""),
    which any gRPC server with the standard health service answers."""

    def __init__(self, settings: Settings):
        self.tool_runner = ToolRunnerClient(settings.tool_runner_addr, settings.rpc_timeout)
        self.memory = MemoryClient(settings.memory_addr, settings.rpc_timeout)
        self.skills = SkillsClient(settings.skills_addr, settings.rpc_timeout)
        self.connectors = (
            ToolServiceClient(
                "connectors",
                settings.connectors_addr,
                CONNECTORS_GRPC_SERVICE,
                settings.rpc_timeout,
                health_service="",
            )
            if settings.connectors_addr
            else None
        )
        self.custom = [
            ToolServiceClient(
                s.name,
                s.address,
                TOOL_SERVICE_GRPC_SERVICE,
                settings.rpc_timeout,
                health_service="",
            )
            for s in settings.custom_tool_services
        ]

    @property
    def builtin(self) -> list[ToolServiceClient]:
        return [self.tool_runner, self.memory, self.skills]

    @property
    def tool_services(self) -> list[ToolServiceClient]:
        connectors = [self.connectors] if self.connectors is not None else []
        return [*self.builtin, *connectors, *self.custom]

    async def dependency_states(self) -> list[DependencyState]:
        return list(await asyncio.gather(*(c.health() for c in self.tool_services)))

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.tool_services))
