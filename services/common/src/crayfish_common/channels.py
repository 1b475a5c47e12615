"""Client channel helpers shared by the services that call other services.

A channel is a pool: `host:port` is resolved through DNS (`dns:///host:port`, every address the
name has, re-resolved when connections drop), calls are spread `round_robin` over the backends,
and a backend whose standard health service stops answering SERVING gets no calls.
"""

from __future__ import annotations

import json

import grpc

from crayfish_common.grpc_server import MAX_MESSAGE_BYTES
from crayfish_common.tracing import grpc_client_interceptors

SERVICE_CONFIG = json.dumps(
    {"loadBalancingConfig": [{"round_robin": {}}], "healthCheckConfig": {"serviceName": ""}}
)
_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:")


def target(address: str) -> str:
    """The gRPC target for an address: `host:port` becomes `dns:///host:port`."""
    return address if address.startswith(_SCHEMES) else f"dns:///{address}"


def aio_channel(address: str) -> grpc.aio.Channel:
    """An insecure aio channel (services talk on a private network) with our message limits."""
    return grpc.aio.insecure_channel(
        target(address),
        interceptors=grpc_client_interceptors() or None,
        options=[
            ("grpc.service_config", SERVICE_CONFIG),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.enable_retries", 1),
            # A restarted dependency is found again within ~2 s, not after minutes of backoff.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 2000),
        ],
    )
