"""Entry point: `python -m memory` serves the memory gRPC service."""

from __future__ import annotations

import asyncio
import os
import sys

from crayfish_common.grpc_server import CannotListen
from crayfish_common.logs import configure_logging
from crayfish_common.settings_errors import exit_cannot_listen, settings_or_exit
from crayfish_common.tracing import setup_tracing

from memory.config import MemorySettings
from memory.server import serve


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    settings = settings_or_exit(MemorySettings, "memory")
    configure_logging("memory", settings.log_level, settings.log_json)
    setup_tracing("memory")  # on when OTEL_EXPORTER_OTLP_ENDPOINT is set
    try:
        return asyncio.run(serve(settings))
    except CannotListen as exc:
        exit_cannot_listen("memory", settings, exc)


if __name__ == "__main__":
    sys.exit(main())
