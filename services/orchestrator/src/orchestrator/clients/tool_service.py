"""A client of any tool service: ListTools and RunTool of `crayfish.common.v1`, by service name.

Every Crayfish service offers its tools through the same two RPCs under its own gRPC service
name; this client needs only that name and an address, so it serves any number of services.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from crayfish.common.v1 import tools_pb2
from crayfish_common.channels import aio_channel
from crayfish_common.tools import ToolResult

from orchestrator.clients.errors import raising_typed_errors
from orchestrator.clients.health import DependencyState, check_health

# Receives a running tool's output as it comes: (stream name, text).
OutputSink = Callable[[str, str], Awaitable[None]]
# The contract alone (proto/crayfish/common/v1/tools.proto): what a custom tool service serves.
TOOL_SERVICE_GRPC_SERVICE = "crayfish.common.v1.ToolService"
# The connectors service (services/connectors: MCP servers, web_fetch) under its own name.
CONNECTORS_GRPC_SERVICE = "crayfish.connectors.v1.ConnectorsService"


@dataclass(frozen=True)
class ToolSpec:
    """A tool as its service describes it; `parameters` is a JSON schema of an object."""

    name: str
    description: str
    parameters: dict[str, Any]


class ToolServiceClient:
    """One service's tools over one channel; calls raise the typed errors of `clients.errors`."""

    def __init__(
        self,
        name: str,
        address: str,
        grpc_service: str,
        rpc_timeout: float,
        health_service: str | None = None,
    ):
        """`health_service` is the name asked in the standard health check: by default the
        gRPC service's own; "" asks about the whole server."""
        self.name = name
        self.address = address
        self.grpc_service = grpc_service
        self.rpc_timeout = rpc_timeout
        self.health_service = grpc_service if health_service is None else health_service
        self.channel = aio_channel(address)
        # Tools the service has but held back at its last listing, with the reason.
        self.not_offered: dict[str, str] = {}
        self._list_tools = self.channel.unary_unary(
            f"/{grpc_service}/ListTools",
            request_serializer=tools_pb2.ListToolsRequest.SerializeToString,
            response_deserializer=tools_pb2.ListToolsResponse.FromString,
        )
        self._run_tool = self.channel.unary_unary(
            f"/{grpc_service}/RunTool",
            request_serializer=tools_pb2.RunToolRequest.SerializeToString,
            response_deserializer=tools_pb2.RunToolResponse.FromString,
        )

    async def list_tools(self) -> list[ToolSpec]:
        with raising_typed_errors(self.name):
            reply = await self._list_tools(tools_pb2.ListToolsRequest(), timeout=self.rpc_timeout)
        self.not_offered = {held.name: held.reason for held in reply.not_offered}
        return [
            ToolSpec(spec.name, spec.description, _schema(spec.parameters_json))
            for spec in reply.tools
        ]

    async def run_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        session_id: str,
        call_id: str,
        deadline: float,
        on_output: OutputSink | None = None,
    ) -> ToolResult:
        """Runs one call; this service sends no output before the result, so on_output is idle."""
        request = run_tool_request(name, arguments, session_id, call_id)
        with raising_typed_errors(self.name):
            reply = await self._run_tool(request, timeout=deadline)
        return tool_result(reply)

    async def health(self) -> DependencyState:
        return await check_health(self.channel, self.name, self.address, self.health_service)

    async def close(self) -> None:
        await self.channel.close()


def run_tool_request(
    name: str, arguments: dict[str, Any], session_id: str, call_id: str
) -> tools_pb2.RunToolRequest:
    return tools_pb2.RunToolRequest(
        name=name,
        arguments_json=json.dumps(arguments, ensure_ascii=False),
        session_id=session_id,
        call_id=call_id,
    )


def tool_result(reply: tools_pb2.RunToolResponse) -> ToolResult:
    return ToolResult(
        ok=reply.ok,
        output=reply.output,
        data=_json_object(reply.result_json),
        error=reply.error,
        exit_code=reply.exit_code,
        duration_ms=reply.duration_ms,
        truncated=reply.truncated,
    )


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _schema(text: str) -> dict[str, Any]:
    """The tool's JSON schema; an object with no rules when it sent none or nothing usable."""
    schema = _json_object(text)
    return schema or {"type": "object"}
