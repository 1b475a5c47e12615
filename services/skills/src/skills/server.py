"""Wires the skills servicer into the shared gRPC server (health, graceful shutdown)."""

from __future__ import annotations

from crayfish.skills.v1 import skills_pb2_grpc
from crayfish_common.grpc_server import GrpcService, serve

from skills.config import SkillsSettings
from skills.hub import SkillsHub
from skills.servicer import SkillsServicer

SERVICE_NAME = "crayfish.skills.v1.SkillsService"


def registrar(hub: SkillsHub):
    def register(server) -> None:
        skills_pb2_grpc.add_SkillsServiceServicer_to_server(SkillsServicer(hub), server)

    return register


async def start_service(settings: SkillsSettings) -> tuple[GrpcService, SkillsHub]:
    """Starts hub and server (tests use port 0); the caller stops both."""
    hub = SkillsHub(settings)
    await hub.start()
    service = GrpcService([SERVICE_NAME], [registrar(hub)])
    await service.start(settings.listen_address)
    return service, hub


async def run(settings: SkillsSettings) -> None:
    """Serves until SIGTERM/SIGINT."""
    hub = SkillsHub(settings)
    await hub.start()
    await serve(settings, [SERVICE_NAME], [registrar(hub)], on_shutdown=hub.stop)
