"""Bearer-token auth: every route but /healthz when CRAYFISH_API_TOKEN is set."""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from orchestrator.api.errors import error_response

OPEN_PATHS = {"/healthz"}


class BearerAuth:
    """ASGI middleware comparing the token in constant time; 401 JSON otherwise."""

    def __init__(self, app: ASGIApp, token: str):
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"authorization", b"")
        if not hmac.compare_digest(given, self.expected):
            response = error_response(401, "missing or wrong bearer token", "invalid_api_key")
            response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class BodyLimit:
    """Refuses request bodies larger than max_bytes with 413, before the route reads them."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            message = f"request body over {self.max_bytes} bytes"
            await error_response(413, message, "body_too_large")(scope, receive, send)
            return
        seen = 0

        async def limited_receive() -> dict:  # type: ignore[type-arg]
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise ValueError(f"request body over {self.max_bytes} bytes")
            return message

        await self.app(scope, limited_receive, send)
