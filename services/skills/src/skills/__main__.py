"""Entry point: `python -m skills`."""

from __future__ import annotations

import asyncio

from crayfish_common.grpc_server import CannotListen
from crayfish_common.logs import configure_logging
from crayfish_common.settings_errors import exit_cannot_listen, settings_or_exit
from crayfish_common.tracing import setup_tracing

from skills.config import SkillsSettings
from skills.server import run


def main() -> None:
    settings = settings_or_exit(SkillsSettings, "skills")
    configure_logging("skills", settings.log_level, settings.log_json)
    setup_tracing("skills")  # on when OTEL_EXPORTER_OTLP_ENDPOINT is set
    try:
        asyncio.run(run(settings))
    except CannotListen as exc:
        exit_cannot_listen("skills", settings, exc)


if __name__ == "__main__":
    main()
