"""Entry point: `python -m tool_runner` serves ToolRunnerService on TOOL_RUNNER_HOST:PORT."""

from __future__ import annotations

import asyncio
import logging
import sys

from crayfish_common.grpc_server import CannotListen
from crayfish_common.logs import configure_logging
from crayfish_common.settings_errors import exit_cannot_listen, settings_or_exit
from crayfish_common.tracing import setup_tracing

from tool_runner.config import ToolRunnerSettings
from tool_runner.sandbox.base import SandboxUnavailable
from tool_runner.secrets import SecretsError
from tool_runner.server import serve


def main() -> int:
    settings = settings_or_exit(ToolRunnerSettings, "tool-runner")
    configure_logging("tool-runner", settings.log_level, settings.log_json)
    setup_tracing("tool-runner")  # on when OTEL_EXPORTER_OTLP_ENDPOINT is set
    try:
        asyncio.run(serve(settings))
    except CannotListen as exc:
        exit_cannot_listen("tool-runner", settings, exc)
    except SecretsError as exc:
        print(f"tool-runner: cannot start: {exc}", file=sys.stderr)  # one line, as bad settings
        return 2
    except SandboxUnavailable as exc:
        logging.getLogger("tool_runner").error("refusing to start: %s", exc)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
