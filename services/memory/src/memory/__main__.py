"""Entry point: `python -m memory` serves the memory gRPC service."""

from __future__ import annotations

import asyncio
import os
import sys

from crayfish_common.logs import configure_logging

from memory.config import MemorySettings
from memory.server import serve


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    settings = MemorySettings()
    configure_logging("memory", settings.log_level, settings.log_json)
    return asyncio.run(serve(settings))


if __name__ == "__main__":
    sys.exit(main())
