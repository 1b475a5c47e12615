"""Runs the orchestrator: `python -m orchestrator`."""

from __future__ import annotations

import logging
import socket
import sys

import uvicorn
from crayfish_common.logs import configure_logging
from crayfish_common.settings_errors import settings_or_exit
from crayfish_common.tracing import setup_tracing

from orchestrator.app import create_app
from orchestrator.config import Settings

log = logging.getLogger("orchestrator")


def main() -> int:
    settings = settings_or_exit(Settings, "orchestrator")
    if not settings.database_url:
        print(
            "orchestrator: CRAYFISH_DATABASE_URL is unset: name a PostgreSQL server "
            "(`make run` starts one and sets it)",
            file=sys.stderr,
        )
        return 2
    listening = listen_or_say_why(settings)
    if listening is None:
        return 2
    configure_logging("orchestrator", settings.log_level, settings.log_json)
    setup_tracing("orchestrator")  # on when OTEL_EXPORTER_OTLP_ENDPOINT is set
    if not settings.api_token:
        log.warning(
            "CRAYFISH_API_TOKEN is unset: no authentication, listening on %s only",
            settings.http_host,
        )
    config = uvicorn.Config(
        create_app(settings, freeze_heap=True),
        host=settings.http_host,
        port=settings.http_port,
        log_level=settings.log_level.lower(),
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    server.run(sockets=[listening])
    return 0


def listen_or_say_why(settings: Settings) -> socket.socket | None:
    """The bound socket, or None after one line naming the port and the variable that moves it."""
    try:
        return bound_socket(settings.http_host, settings.http_port, settings.http_reuse_port)
    except OSError as exc:
        print(
            f"orchestrator: cannot listen on {settings.http_host}:{settings.http_port} "
            f"({exc.strerror}): set CRAYFISH_HTTP_PORT to another port",
            file=sys.stderr,
        )
        return None


def bound_socket(host: str, port: int, shared: bool) -> socket.socket:
    """The listening socket, bound here so a port in use is one line, not uvicorn's traceback;
    with `shared`, other processes of this user may bind it too (SO_REUSEPORT)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if shared:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


if __name__ == "__main__":
    sys.exit(main())
