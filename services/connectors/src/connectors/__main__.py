"""Entry point: `python -m connectors`."""

from __future__ import annotations

import asyncio
import logging

from crayfish_common import grpc_server, settings_errors
from crayfish_common.logs import configure_logging
from crayfish_common.tracing import setup_tracing

from connectors.config import ConnectorsSettings
from connectors.mcp_config import ConfigError
from connectors.server import run


def main() -> None:
    settings = settings_errors.settings_or_exit(ConnectorsSettings, "connectors")
    configure_logging("connectors", settings.log_level, settings.log_json)
    setup_tracing("connectors")  # on when OTEL_EXPORTER_OTLP_ENDPOINT is set
    try:
        asyncio.run(run(settings))
    except grpc_server.CannotListen as exc:
        settings_errors.exit_cannot_listen("connectors", settings, exc)
    except ConfigError as exc:  # named problem, no traceback: the fix is in the file
        logging.getLogger("connectors").error("cannot start: %s", exc)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
