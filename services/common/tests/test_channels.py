"""A channel is a pool: calls spread round-robin, and a backend that stops SERVING gets none."""

from __future__ import annotations

import asyncio
from collections import Counter

import grpc
from crayfish_common.channels import aio_channel, target
from crayfish_common.grpc_server import GrpcService
from grpc_health.v1 import health_pb2, health_pb2_grpc

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def who_answers(stub: health_pb2_grpc.HealthStub, calls: int) -> Counter[str]:
    """'a' when the backend that knows the service "only-a" answered, else 'b'."""
    seen: Counter[str] = Counter()
    for _ in range(calls):
        try:
            await stub.Check(health_pb2.HealthCheckRequest(service="only-a"), timeout=5)
            seen["a"] += 1
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.NOT_FOUND
            seen["b"] += 1
    return seen


def test_plain_addresses_resolve_through_dns_and_schemes_are_kept():
    assert target("tool-runner:50051") == "dns:///tool-runner:50051"
    assert target("ipv4:127.0.0.1:1,127.0.0.1:2") == "ipv4:127.0.0.1:1,127.0.0.1:2"


async def test_calls_spread_over_backends_and_skip_one_not_serving():
    a, b = GrpcService(["svc"], []), GrpcService(["svc"], [])
    port_a, port_b = await a.start("127.0.0.1:0"), await b.start("127.0.0.1:0")
    await a.health.set("only-a", SERVING)
    channel = aio_channel(f"ipv4:127.0.0.1:{port_a},127.0.0.1:{port_b}")
    try:
        stub = health_pb2_grpc.HealthStub(channel)
        spread = await who_answers(stub, 20)
        assert spread["a"] >= 5 and spread["b"] >= 5, spread
        await a.health.set("", NOT_SERVING)  # a draining replica
        for _ in range(50):
            if (await who_answers(stub, 4))["a"] == 0:
                break
            await asyncio.sleep(0.1)
        assert (await who_answers(stub, 20))["a"] == 0, "a backend not SERVING still got calls"
    finally:
        await channel.close()
        await a.server.stop(None)
        await b.server.stop(None)
