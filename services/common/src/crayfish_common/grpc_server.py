"""gRPC server bootstrap: servicers + standard health service + graceful shutdown on signals."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from crayfish_common.settings import ServiceSettings
from crayfish_common.startup_heap import freeze_startup_heap
from crayfish_common.tracing import grpc_server_interceptors

log = logging.getLogger(__name__)

Registrar = Callable[[grpc.aio.Server], None]
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
MAX_CONNECTION_AGE_MS = 300_000


class CannotListen(RuntimeError):
    """The listen address is taken or not this host's; str() names it."""


class GrpcService:
    """A running aio server with health reporting; start, then wait or stop."""

    def __init__(self, service_names: Sequence[str], registrars: Sequence[Registrar]):
        self.service_names = list(service_names)
        self.server = grpc.aio.server(
            interceptors=grpc_server_interceptors() or None,
            options=[
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                # Clients reconnect (and re-resolve) every few minutes, so they find new
                # replicas; calls under way get an hour to finish (a long `exec` included).
                ("grpc.max_connection_age_ms", MAX_CONNECTION_AGE_MS),
                ("grpc.max_connection_age_grace_ms", 3_600_000),
            ],
        )
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        for register in registrars:
            register(self.server)
        self.port = 0

    async def start(self, address: str) -> int:
        try:
            self.port = self.server.add_insecure_port(address)
        except RuntimeError:  # grpc's message asks for debug logs; the port is in use
            self.port = 0
        if self.port == 0:
            raise CannotListen(f"cannot listen on {address} (in use, or not an address here)")
        await self.server.start()
        for name in ["", *self.service_names]:
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        return self.port

    async def stop(self, grace: float) -> None:
        for name in ["", *self.service_names]:
            await self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.server.stop(grace)


async def serve(
    settings: ServiceSettings,
    service_names: Sequence[str],
    registrars: Sequence[Registrar],
    on_shutdown: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Serves until SIGTERM or SIGINT, then drains in-flight RPCs within the grace period."""
    service = GrpcService(service_names, registrars)
    port = await service.start(settings.listen_address)
    freeze_startup_heap()
    log.info("serving %s on %s:%d", ", ".join(service_names), settings.host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down (grace %.1fs)", settings.shutdown_grace)
    await service.stop(settings.shutdown_grace)
    if on_shutdown is not None:
        await on_shutdown()
    log.info("stopped")
