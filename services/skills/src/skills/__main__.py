"""Entry point: `python -m skills`."""

from __future__ import annotations

import asyncio

from crayfish_common.logs import configure_logging
from crayfish_common.settings_errors import settings_or_exit
from crayfish_common.tracing import setup_tracing

from skills.config import SkillsSettings
from skills.server import run


def main() -> None:
    settings = settings_or_exit(SkillsSettings, "skills")
    configure_logging("skills", settings.log_level, settings.log_json)
    setup_tracing("skills")  # on when OTEL_EXPORTER_OTLP_ENDPOINT is set
    asyncio.run(run(settings))


if __name__ == "__main__":
    main()
