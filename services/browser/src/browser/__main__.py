"""Entry point: `python -m browser` serves the browser tools until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import os

from crayfish_common import grpc_server, settings_errors
from crayfish_common.logs import configure_logging
from crayfish_common.tool_service import TOOL_SERVICE_NAME, ToolSetServicer
from crayfish_common.tracing import setup_tracing

from browser.config import BrowserSettings
from browser.pool import BrowserPool
from browser.tools import browser_tools

log = logging.getLogger("browser")


async def run(settings: BrowserSettings) -> None:
    pool = BrowserPool(settings)
    servicer = ToolSetServicer(browser_tools(pool))
    await grpc_server.serve(
        settings, [TOOL_SERVICE_NAME], [servicer.register], on_shutdown=pool.close
    )


def main() -> None:
    settings = settings_errors.settings_or_exit(BrowserSettings, "browser")
    configure_logging("browser", settings.log_level, settings.log_json)
    setup_tracing("browser")  # on when OTEL_EXPORTER_OTLP_ENDPOINT is set
    if settings.chromium_sandbox and os.geteuid() == 0:
        # Chromium refuses its sandbox as root: running without it is this choice, said aloud.
        log.warning("running as root: Chromium's sandbox is off (run as a non-root user)")
        settings.chromium_sandbox = False
    try:
        asyncio.run(run(settings))
    except grpc_server.CannotListen as exc:
        settings_errors.exit_cannot_listen("browser", settings, exc)


if __name__ == "__main__":
    main()
