"""Errors shaped like OpenAI's (`{"error": {"message", "type", "code"}}`) for every route;
a service client's typed error becomes the matching HTTP status here."""

from __future__ import annotations

import errno
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from orchestrator.agent.presets import UnknownModel
from orchestrator.clients import (
    AlreadyExists,
    DeadlineExceeded,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    ServiceError,
    ServiceUnavailable,
)
from orchestrator.store import StoreUnavailable
from orchestrator.usage.budgets import BudgetExceeded

log = logging.getLogger(__name__)

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    424: "api_error",
    429: "rate_limit_error",
    502: "api_error",
    503: "service_unavailable",
}

# Any other ServiceError (INTERNAL, UNKNOWN, ...) is a 502: the service failed.
HTTP_FOR_SERVICE_ERROR: dict[type[ServiceError], int] = {
    InvalidArgument: 400,
    PermissionDenied: 403,
    NotFound: 404,
    AlreadyExists: 409,
    ResourceExhausted: 413,
    ServiceUnavailable: 503,
    DeadlineExceeded: 504,
}


class ApiError(Exception):
    """Raised by route code; becomes a JSON error with this status."""

    def __init__(self, status: int, message: str, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


class BodyTooLarge(Exception):
    """A streamed body went over the limit (no Content-Length to refuse it up front)."""


def error_body(status: int, message: str, code: str | None = None) -> dict[str, object]:
    return {
        "error": {
            "message": message,
            "type": ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request"),
            "code": code,
        }
    }


def error_response(status: int, message: str, code: str | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, code), status_code=status)


def model_not_found(exc: UnknownModel) -> dict[str, object]:
    """OpenAI's answer to a model it does not have (404), with the presets there are."""
    return {
        "error": {
            "message": str(exc),
            "type": "invalid_request_error",
            "param": "model",
            "code": "model_not_found",
        }
    }


def service_failure(exc: ServiceError) -> ApiError:
    """The HTTP error for a failed service call, with the service's reason."""
    status = HTTP_FOR_SERVICE_ERROR.get(type(exc), 502)
    if status >= 500:
        message = f"the {exc.service} service is unavailable ({exc.status}): {exc.reason}"
    else:
        message = exc.reason or exc.status
    return ApiError(status, message, exc.status.lower())


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.code)

    @app.exception_handler(UnknownModel)
    async def _unknown_model(_: Request, exc: UnknownModel) -> JSONResponse:
        return JSONResponse(model_not_found(exc), status_code=404)

    @app.exception_handler(ServiceError)
    async def _service_error(_: Request, exc: ServiceError) -> JSONResponse:
        failure = service_failure(exc)
        return error_response(failure.status, failure.message, failure.code)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail), None)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
            problems.append(f"{where}: {err.get('msg', 'invalid').removeprefix('Value error, ')}")
        message = "invalid request: " + "; ".join(problems)
        return error_response(400, message, "invalid_request")

    @app.exception_handler(StoreUnavailable)
    async def _store_unavailable(_: Request, exc: StoreUnavailable) -> JSONResponse:
        # Told within a second while the server is down (not after the pool's 30 s wait).
        message = f"{exc}: retry in a moment"
        response = error_response(503, message, "database_unavailable")
        response.headers["Retry-After"] = "2"
        return response

    @app.exception_handler(OSError)
    async def _os_error(_: Request, exc: OSError) -> JSONResponse:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            log.error("data folder full: %s", exc)
            message = "the data folder is full (No space left on device): free space, then retry"
            return error_response(507, message, "storage_full")
        log.exception("unhandled error")
        return error_response(500, "internal error; see the orchestrator log", "internal_error")

    @app.exception_handler(BudgetExceeded)
    async def _over_budget(_: Request, exc: BudgetExceeded) -> JSONResponse:
        response = error_response(429, str(exc), "budget_exceeded")
        response.headers["X-Crayfish-Budget-Cap"] = exc.cap
        return response

    @app.exception_handler(BodyTooLarge)
    async def _too_large(_: Request, exc: BodyTooLarge) -> JSONResponse:
        return error_response(413, str(exc), "body_too_large")

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return error_response(500, "internal error; see the orchestrator log", "internal_error")
