"""Base settings every gRPC service extends: listen address and logging."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class ServiceSettings(BaseSettings):
    """Listen address and logging; subclasses set their own env prefix."""

    model_config = SettingsConfigDict(extra="ignore")

    # The address the gRPC server listens on.
    host: str = "127.0.0.1"
    # The gRPC port.
    port: int = 50051
    # DEBUG, INFO, WARNING or ERROR.
    log_level: str = "INFO"
    # One JSON object per log line (for containers) instead of text.
    log_json: bool = False
    # Seconds in-flight RPCs get to finish on SIGTERM.
    shutdown_grace: float = 5.0

    @property
    def listen_address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return f"{host}:{self.port}"
