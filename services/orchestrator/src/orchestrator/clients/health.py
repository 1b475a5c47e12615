"""The standard gRPC health check of a dependency, as a state for /readyz."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from orchestrator.clients.errors import service_error

HEALTH_TIMEOUT = 2.0


@dataclass(frozen=True)
class DependencyState:
    name: str
    address: str
    ok: bool
    detail: str


async def check_health(
    channel: grpc.aio.Channel, name: str, address: str, grpc_service: str
) -> DependencyState:
    """SERVING or not, with the reason; never raises."""
    stub = health_pb2_grpc.HealthStub(channel)
    try:
        reply = await stub.Check(
            health_pb2.HealthCheckRequest(service=grpc_service), timeout=HEALTH_TIMEOUT
        )
    except grpc.RpcError as exc:
        error = service_error(name, exc)
        return DependencyState(name, address, False, f"{error.status}: {error.reason}")
    serving = reply.status == health_pb2.HealthCheckResponse.SERVING
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return DependencyState(name, address, serving, status)
