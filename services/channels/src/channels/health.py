"""/healthz (the process answers) and /readyz (every channel connected; each one's state)."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from channels.hub import Hub


def health_app(hub: Hub) -> Starlette:
    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> JSONResponse:
        channels = {name: vars(state) for name, state in hub.states.items()}
        ready = hub.ready()
        body = {"ready": ready, "channels": channels}
        return JSONResponse(body, status_code=200 if ready else 503)

    return Starlette(routes=[Route("/healthz", healthz), Route("/readyz", readyz)])
