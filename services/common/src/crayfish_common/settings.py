"""Base settings every gRPC service extends: listen address and logging."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class ServiceSettings(BaseSettings):
    """Listen address and logging; subclasses set their own env prefix."""

    model_config = SettingsConfigDict(extra="ignore")

    host: str = "127.0.0.1"
    port: int = 50051
    log_level: str = "INFO"
    log_json: bool = False
    # Seconds in-flight RPCs get to finish on SIGTERM.
    shutdown_grace: float = 5.0

    @property
    def listen_address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return f"{host}:{self.port}"
