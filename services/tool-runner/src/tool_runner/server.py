"""Wires the ToolRunnerCore and its servicer into the shared gRPC server (health, shutdown)."""

from __future__ import annotations

import grpc
from crayfish.tool_runner.v1 import tool_runner_pb2_grpc
from crayfish_common import grpc_server
from crayfish_common.grpc_server import GrpcService, Registrar

from tool_runner.config import ToolRunnerSettings
from tool_runner.core import ToolRunnerCore
from tool_runner.servicer import SERVICE_NAME, ToolRunnerServicer


def registrar(core: ToolRunnerCore) -> Registrar:
    servicer = ToolRunnerServicer(core)

    def register(server: grpc.aio.Server) -> None:
        tool_runner_pb2_grpc.add_ToolRunnerServiceServicer_to_server(servicer, server)

    return register


async def start_service(settings: ToolRunnerSettings) -> tuple[GrpcService, ToolRunnerCore]:
    """A started server (tests use port 0) and its started core; stop both when done."""
    core = ToolRunnerCore(settings)
    await core.start()
    service = GrpcService([SERVICE_NAME], [registrar(core)])
    try:
        await service.start(settings.listen_address)
    except BaseException:
        await core.close()
        raise
    return service, core


async def serve(settings: ToolRunnerSettings) -> None:
    """Starts the core (SandboxUnavailable if it cannot), serves until SIGTERM/SIGINT, closes."""
    core = ToolRunnerCore(settings)
    await core.start()
    try:
        await grpc_server.serve(settings, [SERVICE_NAME], [registrar(core)])
    finally:
        await core.close()
