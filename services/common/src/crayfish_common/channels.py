"""Client channel helpers shared by the services that call other services."""

from __future__ import annotations

import grpc

from crayfish_common.grpc_server import MAX_MESSAGE_BYTES


def aio_channel(address: str) -> grpc.aio.Channel:
    """An insecure aio channel (services talk on a private network) with our message limits."""
    return grpc.aio.insecure_channel(
        address,
        options=[
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.enable_retries", 1),
            # A restarted dependency is found again within ~2 s, not after minutes of backoff.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 2000),
        ],
    )
