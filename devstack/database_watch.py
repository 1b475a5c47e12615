"""Keeps the launcher's own PostgreSQL server running: restarted when it dies, as the services
are (the orchestrators answer 503 meanwhile and reconnect within seconds once it is back)."""

from __future__ import annotations

import logging
import time

from devstack.postgres import EmbeddedPostgres

log = logging.getLogger("crayfish.launcher")

NAME = "postgres"


def restart_dead_database(
    server: EmbeddedPostgres | None, restarts: dict[str, list[float]], per_minute: int
) -> bool:
    """Restarts `server` if it died (None: an external server, not ours to watch); False when it
    died more than `per_minute` times in the last minute or will not start (the stack stops).
    `restarts` holds the times of each name's restarts, shared with the services'."""
    if server is None or not server.exited():
        return True
    recent = [t for t in restarts.get(NAME, []) if t > time.monotonic() - 60]
    if len(recent) >= per_minute:
        log.error("PostgreSQL keeps exiting; stopping the rest")
        return False
    restarts[NAME] = [*recent, time.monotonic()]
    log.warning("PostgreSQL exited; restarting it (the API answers 503 until it is back)")
    began = time.monotonic()
    try:
        server.restart()
    except (RuntimeError, TimeoutError, OSError) as exc:
        log.error("PostgreSQL did not start again: %s", exc)
        return False
    log.info("PostgreSQL is back after %.1f s", time.monotonic() - began)
    return True
