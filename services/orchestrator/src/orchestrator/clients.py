"""gRPC clients of the tool-runner, memory and skills services, created once per app."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import grpc
from crayfish.common.v1 import tools_pb2
from crayfish.memory.v1 import memory_pb2_grpc
from crayfish.skills.v1 import skills_pb2_grpc
from crayfish.tool_runner.v1 import tool_runner_pb2, tool_runner_pb2_grpc
from crayfish_common.channels import aio_channel
from grpc_health.v1 import health_pb2, health_pb2_grpc

from orchestrator.config import Settings

SERVICE_NAMES = {
    "tool-runner": "crayfish.tool_runner.v1.ToolRunnerService",
    "memory": "crayfish.memory.v1.MemoryService",
    "skills": "crayfish.skills.v1.SkillsService",
}


@dataclass
class DependencyState:
    name: str
    address: str
    ok: bool
    detail: str


class ServiceClients:
    """Channels and stubs for the three gRPC services."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.addresses = {
            "tool-runner": settings.tool_runner_addr,
            "memory": settings.memory_addr,
            "skills": settings.skills_addr,
        }
        self.channels = {name: aio_channel(addr) for name, addr in self.addresses.items()}
        self.tool_runner = tool_runner_pb2_grpc.ToolRunnerServiceStub(self.channels["tool-runner"])
        self.memory = memory_pb2_grpc.MemoryServiceStub(self.channels["memory"])
        self.skills = skills_pb2_grpc.SkillsServiceStub(self.channels["skills"])
        # Every stub has ListTools and RunTool (crayfish.common.v1); the stubs share no base type.
        self.tool_stubs: dict[str, Any] = {
            "tool-runner": self.tool_runner,
            "memory": self.memory,
            "skills": self.skills,
        }

    async def close(self) -> None:
        await asyncio.gather(*(ch.close() for ch in self.channels.values()))

    async def list_tools(self, service: str) -> list[tools_pb2.ToolSpec]:
        stub = self.tool_stubs[service]
        reply = await stub.ListTools(
            tools_pb2.ListToolsRequest(), timeout=self.settings.rpc_timeout
        )
        return list(reply.tools)

    async def run_tool(
        self, service: str, request: tools_pb2.RunToolRequest, deadline: float
    ) -> tools_pb2.RunToolResponse:
        return await self.tool_stubs[service].RunTool(request, timeout=deadline)

    def run_tool_stream(
        self, request: tools_pb2.RunToolRequest, deadline: float
    ) -> grpc.aio.UnaryStreamCall:
        """Streams a tool-runner call: output chunks, then the result."""
        return self.tool_runner.RunToolStream(request, timeout=deadline)

    async def close_session(self, session_id: str) -> None:
        """Asks the tool-runner to release the session's sandbox (its container); idempotent."""
        await self.tool_runner.CloseSession(
            tool_runner_pb2.CloseSessionRequest(session_id=session_id),
            timeout=self.settings.rpc_timeout,
        )

    async def describe_sandbox(self) -> tool_runner_pb2.DescribeSandboxResponse:
        return await self.tool_runner.DescribeSandbox(
            tool_runner_pb2.DescribeSandboxRequest(), timeout=self.settings.rpc_timeout
        )

    async def dependency_states(self) -> list[DependencyState]:
        return list(await asyncio.gather(*(self._health(n) for n in self.addresses)))

    async def _health(self, name: str) -> DependencyState:
        stub = health_pb2_grpc.HealthStub(self.channels[name])
        address = self.addresses[name]
        try:
            reply = await stub.Check(
                health_pb2.HealthCheckRequest(service=SERVICE_NAMES[name]), timeout=2.0
            )
        except grpc.RpcError as exc:
            return DependencyState(name, address, False, f"{exc.code().name}: {exc.details()}")
        serving = reply.status == health_pb2.HealthCheckResponse.SERVING
        status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
        return DependencyState(name, address, serving, status)
