"""Typed errors of the service clients, mapped from gRPC status codes here and nowhere else."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import grpc


class ServiceError(Exception):
    """A call to `service` failed: `status` is the gRPC status name, `reason` the service's words.

    Raised as is for a status with no class of its own (INTERNAL, UNKNOWN, ...): the service
    failed.
    """

    def __init__(self, service: str, status: str, reason: str = ""):
        message = f"the {service} service answered {status}"
        super().__init__(f"{message}: {reason}" if reason else message)
        self.service = service
        self.status = status
        self.reason = reason


class InvalidArgument(ServiceError):
    """The service refused the request as given (also FAILED_PRECONDITION and OUT_OF_RANGE)."""


class NotFound(ServiceError):
    """What the request names does not exist."""


class AlreadyExists(ServiceError):
    """What the request would create exists already."""


class PermissionDenied(ServiceError):
    """The service does not allow this."""


class ResourceExhausted(ServiceError):
    """Too large, or over one of the service's limits."""


class ServiceUnavailable(ServiceError):
    """The service is down or unreachable; the same call may work later."""


class DeadlineExceeded(ServiceError):
    """No answer within the call's timeout."""


ERRORS: dict[grpc.StatusCode, type[ServiceError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.FAILED_PRECONDITION: InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: ServiceUnavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
}


def service_error(service: str, exc: grpc.RpcError) -> ServiceError:
    """The typed error for a failed call."""
    if isinstance(exc, grpc.aio.AioRpcError | grpc.Call):
        code, reason = exc.code(), exc.details() or ""
    else:
        code, reason = grpc.StatusCode.UNKNOWN, str(exc)
    return ERRORS.get(code, ServiceError)(service, code.name, reason)


@contextmanager
def raising_typed_errors(service: str) -> Iterator[None]:
    """Turns a gRPC error raised inside the block into the matching ServiceError."""
    try:
        yield
    except grpc.RpcError as exc:
        raise service_error(service, exc) from exc
