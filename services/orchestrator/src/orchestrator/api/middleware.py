"""ASGI middleware: trusted Host and Origin (every route), bearer-token auth (every route but
/healthz and the page when CRAYFISH_API_TOKEN is set), request body limits, request metrics.

Middleware rather than FastAPI's HTTPBearer dependency: it covers every path (unknown ones and
the OpenAPI page too) with one constant-time check; Starlette has no body-size limit of its own.
"""

from __future__ import annotations

import hmac
import re

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchestrator.api.errors import BodyTooLarge, error_response
from orchestrator.api.trusted_hosts import TrustedHosts
from orchestrator.metrics import Metrics

# The page and its static assets hold no data, and a browser cannot send a Bearer header when
# it loads a page: they are open; the page sends the token on its own API calls.
OPEN_PATHS = {"/healthz", "/"}
OPEN_PREFIXES = ("/static/",)
# What the channels service's token may do (CRAYFISH_CHANNELS_TOKEN): its own routes, follow,
# stop and answer its turns, and the sessions of chats (ids `<channel>.<chat>`); never approve
# a pairing, change a policy or read other sessions.
CHANNEL_ROUTES = (
    ("POST", re.compile(r"/api/channels/[^/]+/(pairings|turns|replies/[^/]+|messages/[^/]+)")),
    ("GET", re.compile(r"/api/channels/[^/]+/(replies|messages|images)")),
    ("GET", re.compile(r"/api/tasks/[^/]+(/events)?")),
    ("POST", re.compile(r"/api/tasks/[^/]+/cancel")),
    ("POST", re.compile(r"/api/approvals/[^/]+")),
    ("GET|PATCH|DELETE", re.compile(r"/api/sessions/[a-z][a-z0-9_-]*\.[^/]+")),
    ("GET", re.compile(r"/readyz")),
)


class HostGuard:
    """421 for a Host that does not name this server (DNS rebinding), 403 for a request a page
    of another site sent (its Origin): before any route, /mcp and the page included."""

    def __init__(self, app: ASGIApp, trusted: TrustedHosts):
        self.app = app
        self.trusted = trusted

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        problem = self.trusted.host_problem(host)
        if problem is not None:
            await error_response(421, problem, "untrusted_host")(scope, receive, send)
            return
        problem = self.trusted.origin_problem(headers.get("origin"), host or "")
        if problem is not None:
            await error_response(403, problem, "untrusted_origin")(scope, receive, send)
            return
        await self.app(scope, receive, send)


class BearerAuth:
    """ASGI middleware comparing the token in constant time; 401 JSON otherwise. The channels
    token (when set) passes on CHANNEL_ROUTES only; elsewhere 403."""

    def __init__(self, app: ASGIApp, token: str, channels_token: str = ""):
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.channels = f"Bearer {channels_token}".encode() if channels_token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"] if scope["type"] == "http" else ""
        if scope["type"] != "http" or path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"authorization", b"")
        if self.channels is not None and hmac.compare_digest(given, self.channels):
            if not channel_route(scope["method"], path):
                message = "the channels token may not use this route"
                await error_response(403, message, "route_forbidden")(scope, receive, send)
                return
        elif not hmac.compare_digest(given, self.expected):
            response = error_response(401, "missing or wrong bearer token", "invalid_api_key")
            response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def channel_route(method: str, path: str) -> bool:
    return any(
        method in methods.split("|") and pattern.fullmatch(path)
        for methods, pattern in CHANNEL_ROUTES
    )


class BodyLimit:
    """Refuses request bodies over the limit with 413 (uploads and messages that may carry
    images have their own, larger limits in `path_limits`)."""

    def __init__(self, app: ASGIApp, max_bytes: int, path_limits: dict[str, int]):
        self.app = app
        self.max_bytes = max_bytes
        self.path_limits = path_limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.path_limits.get(scope["path"], self.max_bytes)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            message = f"request body over {limit} bytes"
            await error_response(413, message, "body_too_large")(scope, receive, send)
            return
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLarge(f"request body over {limit} bytes")
            return message

        await self.app(scope, limited_receive, send)


class RequestMetrics:
    """Counts requests by method, route template and status for /metrics."""

    def __init__(self, app: ASGIApp, metrics: Metrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            self.metrics.observe_request(scope["method"], path, status)
