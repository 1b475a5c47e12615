"""Entry point: `python -m memory` serves the memory gRPC service."""

from __future__ import annotations

import asyncio
import os
import sys

from crayfish_common.logs import configure_logging
from crayfish_common.settings_errors import settings_or_exit
from crayfish_common.tracing import setup_tracing

from memory.config import MemorySettings
from memory.server import serve


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    settings = settings_or_exit(MemorySettings, "memory")
    configure_logging("memory", settings.log_level, settings.log_json)
    setup_tracing("memory")  # on when OTEL_EXPORTER_OTLP_ENDPOINT is set
    return asyncio.run(serve(settings))


if __name__ == "__main__":
    sys.exit(main())
