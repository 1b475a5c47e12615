"""The web chat page: `/` and its static assets, served from the package's web/ folder."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

from orchestrator.api.errors import ApiError

router = APIRouter(include_in_schema=False)
WEB_DIR = Path(__file__).resolve().parent.parent / "web"
# An explicit list: nothing else in the folder (or outside it) can be asked for.
ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "render.js": "text/javascript; charset=utf-8",
    "markdown.js": "text/javascript; charset=utf-8",
    "menu.js": "text/javascript; charset=utf-8",
    "usage.js": "text/javascript; charset=utf-8",
    "memory_history.js": "text/javascript; charset=utf-8",
    "model_command.js": "text/javascript; charset=utf-8",
    "pairings.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "Referrer-Policy": "no-referrer",
}


@router.get("/")
async def index() -> FileResponse:
    return FileResponse(WEB_DIR / "index.html", media_type="text/html", headers=HEADERS)


@router.get("/static/{name}")
async def asset(name: str) -> FileResponse:
    if name not in ASSETS:
        raise ApiError(404, f"no asset named {name!r}", "not_found")
    return FileResponse(WEB_DIR / name, media_type=ASSETS[name], headers=HEADERS)
