"""The gRPC side of the tool contract: ListTools and RunTool for any servicer with a ToolSet."""

from __future__ import annotations

import json
from collections.abc import Mapping

import grpc
from crayfish.common.v1 import tools_pb2, tools_pb2_grpc

from crayfish_common.tools import CallContext, ToolResult, ToolSet

# The gRPC service of the contract alone: what a service that offers nothing but tools serves.
TOOL_SERVICE_NAME = "crayfish.common.v1.ToolService"


def list_tools_response(
    tools: ToolSet, not_offered: Mapping[str, str] | None = None
) -> tools_pb2.ListToolsResponse:
    """The offered tools, and those held back with the reason (`not_offered`)."""
    return tools_pb2.ListToolsResponse(
        not_offered=[
            tools_pb2.NotOfferedTool(name=name, reason=reason)
            for name, reason in (not_offered or {}).items()
        ],
        tools=[
            tools_pb2.ToolSpec(
                name=tool.name,
                description=tool.description,
                parameters_json=json.dumps(tool.parameters),
            )
            for tool in tools
        ],
    )


def run_tool_response(result: ToolResult) -> tools_pb2.RunToolResponse:
    return tools_pb2.RunToolResponse(
        ok=result.ok,
        output=result.output,
        result_json=json.dumps(result.data, ensure_ascii=False),
        error=result.error,
        exit_code=result.exit_code,
        duration_ms=result.duration_ms,
        truncated=result.truncated,
    )


def tool_call(request: tools_pb2.RunToolRequest) -> CallContext:
    return CallContext(session_id=request.session_id, call_id=request.call_id)


class ToolServicerMixin:
    """ListTools / RunTool (crayfish.common.v1) for a servicer; it supplies `tool_set`."""

    async def tool_set(self, context: grpc.aio.ServicerContext) -> ToolSet:
        """The service's tools (may wait for start-up, or abort with UNAVAILABLE)."""
        raise NotImplementedError

    def not_offered(self) -> Mapping[str, str]:
        """Tools the service has but does not offer now, by name, with the reason."""
        return {}

    async def ListTools(self, request, context):  # type: ignore[no-untyped-def]
        return list_tools_response(await self.tool_set(context), self.not_offered())

    async def RunTool(self, request, context):  # type: ignore[no-untyped-def]
        tools = await self.tool_set(context)
        result = await tools.run(request.name, request.arguments_json, tool_call(request))
        return run_tool_response(result)


class ToolSetServicer(ToolServicerMixin, tools_pb2_grpc.ToolServiceServicer):
    """`crayfish.common.v1.ToolService` for a fixed ToolSet: a whole tool service in one line."""

    def __init__(self, tools: ToolSet, not_offered: Mapping[str, str] | None = None):
        self.tools = tools
        self.held_back = dict(not_offered or {})

    async def tool_set(self, context: grpc.aio.ServicerContext) -> ToolSet:
        return self.tools

    def not_offered(self) -> Mapping[str, str]:
        return self.held_back

    def register(self, server: grpc.aio.Server) -> None:
        """A registrar for `crayfish_common.grpc_server.serve` / `GrpcService`."""
        tools_pb2_grpc.add_ToolServiceServicer_to_server(self, server)
