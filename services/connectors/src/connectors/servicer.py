"""gRPC ConnectorsService: the shared tool RPCs plus the MCP servers' status."""

from __future__ import annotations

from collections.abc import Mapping

import grpc
from crayfish.connectors.v1 import connectors_pb2, connectors_pb2_grpc
from crayfish_common.tool_service import ToolServicerMixin
from crayfish_common.tools import ToolSet

from connectors.core import ConnectorsCore

SERVICE_NAME = "crayfish.connectors.v1.ConnectorsService"


class ConnectorsServicer(ToolServicerMixin, connectors_pb2_grpc.ConnectorsServiceServicer):
    """Thin translation layer; the domain lives behind ConnectorsCore."""

    def __init__(self, core: ConnectorsCore):
        self.core = core

    async def tool_set(self, context: grpc.aio.ServicerContext) -> ToolSet:
        return self.core.tool_set()  # rebuilt when an MCP server's tools or state change

    def not_offered(self) -> Mapping[str, str]:
        return self.core.not_offered  # web_search without a usable provider

    async def ListServers(self, request, context):
        return connectors_pb2.ListServersResponse(
            servers=[
                connectors_pb2.McpServerStatus(
                    name=s.name,
                    transport=s.transport,
                    state=s.state,
                    error=s.error,
                    tool_count=s.tool_count,
                )
                for s in self.core.servers()
            ],
            config_problems=self.core.config_problems,
        )
