"""Maps gRPC errors from the services to HTTP errors with the service's reason."""

from __future__ import annotations

import grpc

from orchestrator.api.errors import ApiError

HTTP_FOR_GRPC = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 413,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}


def api_error(service: str, exc: grpc.RpcError) -> ApiError:
    code = exc.code()
    status = HTTP_FOR_GRPC.get(code, 502)
    if status >= 500:
        message = f"the {service} service is unavailable ({code.name}): {exc.details()}"
    else:
        message = exc.details() or code.name
    return ApiError(status, message, code.name.lower())
