"""Entry point: `python -m browser` serves the browser tools until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import os

from crayfish_common.grpc_server import serve
from crayfish_common.logs import configure_logging
from crayfish_common.tool_service import TOOL_SERVICE_NAME, ToolSetServicer

from browser.config import BrowserSettings
from browser.pool import BrowserPool
from browser.tools import browser_tools

log = logging.getLogger("browser")


async def run(settings: BrowserSettings) -> None:
    pool = BrowserPool(settings)
    servicer = ToolSetServicer(browser_tools(pool))
    await serve(settings, [TOOL_SERVICE_NAME], [servicer.register], on_shutdown=pool.close)


def main() -> None:
    settings = BrowserSettings()
    configure_logging("browser", settings.log_level, settings.log_json)
    if settings.chromium_sandbox and os.geteuid() == 0:
        # Chromium refuses its sandbox as root; running unsandboxed is this choice, said aloud.
        log.warning("running as root: Chromium's sandbox is off (run as a non-root user)")
        settings.chromium_sandbox = False
    asyncio.run(run(settings))


if __name__ == "__main__":
    main()
