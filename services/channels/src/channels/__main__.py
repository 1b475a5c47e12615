"""Runs the channels service: `python -m channels`."""

from __future__ import annotations

import asyncio
import logging
import sys

import uvicorn
from crayfish_common.logs import configure_logging
from crayfish_common.settings_errors import settings_or_exit
from crayfish_common.tracing import setup_tracing

from channels.api_client import OrchestratorClient
from channels.config import ChannelsSettings
from channels.health import health_app
from channels.hub import Hub
from channels.registry import configured

log = logging.getLogger("channels")


async def serve(settings: ChannelsSettings) -> None:
    channels = configured(settings)
    if not channels:
        log.warning("no channel is configured (e.g. CHANNELS_TELEGRAM_TOKEN): nothing to run")
    api = OrchestratorClient(settings.orchestrator_url, settings.api_token, settings.call_timeout)
    hub = Hub(channels, api, settings)
    config = uvicorn.Config(
        health_app(hub),
        host=settings.http_host,
        port=settings.http_port,
        log_level="warning",
        lifespan="off",
    )
    await hub.start()
    log.info(
        "channels: %s; health on %s:%d",
        [c.name for c in channels] or "none",
        settings.http_host,
        settings.http_port,
    )
    try:
        await uvicorn.Server(config).serve()  # returns on SIGTERM/SIGINT
    finally:
        await hub.close()
        await api.close()


def main() -> int:
    settings = settings_or_exit(ChannelsSettings, "channels")
    configure_logging("channels", settings.log_level, settings.log_json)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per poll and per call
    setup_tracing("channels")  # on when OTEL_EXPORTER_OTLP_ENDPOINT is set
    asyncio.run(serve(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
