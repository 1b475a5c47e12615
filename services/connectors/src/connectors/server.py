"""Wires the connectors servicer into the shared gRPC server (health, graceful shutdown)."""

from __future__ import annotations

import grpc
from crayfish.connectors.v1 import connectors_pb2_grpc
from crayfish_common.grpc_server import GrpcService, Registrar, serve

from connectors.config import ConnectorsSettings
from connectors.core import ConnectorsCore
from connectors.servicer import SERVICE_NAME, ConnectorsServicer


def registrar(core: ConnectorsCore) -> Registrar:
    def register(server: grpc.aio.Server) -> None:
        connectors_pb2_grpc.add_ConnectorsServiceServicer_to_server(
            ConnectorsServicer(core), server
        )

    return register


async def start_service(settings: ConnectorsSettings) -> tuple[GrpcService, ConnectorsCore]:
    """Starts the core, then the server (tests use port 0); the caller stops both."""
    core = ConnectorsCore(settings)
    await core.start()
    service = GrpcService([SERVICE_NAME], [registrar(core)])
    await service.start(settings.listen_address)
    return service, core


async def run(settings: ConnectorsSettings) -> None:
    """Serves until SIGTERM/SIGINT; in-flight calls drain before the MCP servers stop."""
    core = ConnectorsCore(settings)
    await core.start()
    await serve(settings, [SERVICE_NAME], [registrar(core)], on_shutdown=core.stop)
