"""Runs the orchestrator: `python -m orchestrator`."""

from __future__ import annotations

import logging
import sys

import uvicorn
from crayfish_common.logs import configure_logging
from crayfish_common.tracing import setup_tracing
from pydantic import ValidationError

from orchestrator.app import create_app
from orchestrator.config import Settings

log = logging.getLogger("orchestrator")


def main() -> int:
    try:
        settings = Settings()
    except ValidationError as exc:
        print(f"orchestrator: bad configuration:\n{exc}", file=sys.stderr)
        return 2
    if not settings.database_url:
        print(
            "orchestrator: CRAYFISH_DATABASE_URL is unset: name a PostgreSQL server "
            "(`make run` starts one and sets it)",
            file=sys.stderr,
        )
        return 2
    configure_logging("orchestrator", settings.log_level, settings.log_json)
    setup_tracing("orchestrator")  # on when OTEL_EXPORTER_OTLP_ENDPOINT is set
    if not settings.api_token:
        log.warning(
            "CRAYFISH_API_TOKEN is unset: no authentication, listening on %s only",
            settings.http_host,
        )
    log.info("LLM %s at %s", settings.model, settings.openai_base_url)
    uvicorn.run(
        create_app(settings),
        host=settings.http_host,
        port=settings.http_port,
        log_level=settings.log_level.lower(),
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
