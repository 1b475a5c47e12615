"""Wires the skills servicer into the shared gRPC server (health, graceful shutdown)."""

from __future__ import annotations

import grpc
from crayfish.skills.v1 import skills_pb2_grpc
from crayfish_common.grpc_server import GrpcService, Registrar, serve

from skills.config import SkillsSettings
from skills.core import SkillsCore
from skills.servicer import SERVICE_NAME, SkillsServicer


def registrar(core: SkillsCore) -> Registrar:
    def register(server: grpc.aio.Server) -> None:
        skills_pb2_grpc.add_SkillsServiceServicer_to_server(SkillsServicer(core), server)

    return register


async def start_service(settings: SkillsSettings) -> tuple[GrpcService, SkillsCore]:
    """Starts the core, then the server (tests use port 0); the caller stops both."""
    core = SkillsCore(settings)
    await core.start()
    service = GrpcService([SERVICE_NAME], [registrar(core)])
    await service.start(settings.listen_address)
    return service, core


async def run(settings: SkillsSettings) -> None:
    """Serves until SIGTERM/SIGINT; in-flight RPCs drain before the core stops."""
    core = SkillsCore(settings)
    await core.start()
    await serve(settings, [SERVICE_NAME], [registrar(core)], on_shutdown=core.stop)
