"""Wires the memory servicer into the shared gRPC server with health and graceful shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal

from crayfish.memory.v1 import memory_pb2_grpc
from crayfish_common.grpc_server import GrpcService
from crayfish_common.startup_heap import freeze_startup_heap

from memory.config import MemorySettings
from memory.core import MemoryCore
from memory.embedder import Embedder
from memory.servicer import SERVICE_NAME, MemoryServicer

log = logging.getLogger(__name__)


def build(
    settings: MemorySettings, embedder: Embedder | None = None
) -> tuple[GrpcService, MemoryCore]:
    """A not-yet-started gRPC service and the (not yet started) domain façade behind it."""
    core = MemoryCore(settings, embedder)
    servicer = MemoryServicer(core)
    service = GrpcService(
        [SERVICE_NAME],
        [lambda server: memory_pb2_grpc.add_MemoryServiceServicer_to_server(servicer, server)],
    )
    return service, core


async def serve(settings: MemorySettings) -> int:
    """Serves until SIGTERM/SIGINT; returns 1 when the index cannot open (e.g. dim mismatch)."""
    service, core = build(settings)
    port = await service.start(settings.listen_address)
    log.info("serving %s on %s:%d", SERVICE_NAME, settings.host, port)
    core.start()
    freeze_startup_heap()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    waiters = [asyncio.create_task(stop.wait()), asyncio.create_task(core.failed.wait())]
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waiters:
        waiter.cancel()
    log.info("shutting down (grace %.1fs)", settings.shutdown_grace)
    await service.stop(settings.shutdown_grace)
    await core.stop()
    return 1 if core.failure is not None else 0
