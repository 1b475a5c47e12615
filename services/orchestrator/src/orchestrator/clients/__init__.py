"""Typed clients of the gRPC services: dataclasses in, dataclasses out, typed errors.

The only package of the orchestrator that imports grpc or generated `*_pb2` modules.
"""

from orchestrator.clients.errors import (
    AlreadyExists,
    DeadlineExceeded,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    ServiceError,
    ServiceUnavailable,
)
from orchestrator.clients.health import DependencyState
from orchestrator.clients.services import ServiceClients
from orchestrator.clients.tool_service import OutputSink, ToolServiceClient, ToolSpec

__all__ = [
    "AlreadyExists",
    "DeadlineExceeded",
    "DependencyState",
    "InvalidArgument",
    "NotFound",
    "OutputSink",
    "PermissionDenied",
    "ResourceExhausted",
    "ServiceClients",
    "ServiceError",
    "ServiceUnavailable",
    "ToolServiceClient",
    "ToolSpec",
]
