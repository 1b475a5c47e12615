"""Settings of the connectors service, read from `CONNECTORS_*` environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crayfish_common.settings import ServiceSettings
from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import SettingsConfigDict


class ConnectorsSettings(ServiceSettings):
    """Where the MCP configuration lives, and the limits of MCP calls and web fetches."""

    model_config = SettingsConfigDict(
        env_prefix="CONNECTORS_", extra="ignore", populate_by_name=True
    )

    port: int = 50054
    # The MCP servers (Claude Desktop / nanobot shape); must lie outside the workspace.
    mcp_config: Path | None = Field(
        default=None,
        validation_alias=AliasChoices("CONNECTORS_MCP_CONFIG", "CRAYFISH_MCP_CONFIG"),
    )
    # The assistant's workspace: a config file inside it is refused (commands write there).
    workspace: Path = Path("workspace")
    # Seconds an MCP server gets to connect and list its tools.
    mcp_connect_timeout: float = 30.0
    # Reconnect backoff after a server dies or cannot be reached: doubles from min to max.
    mcp_backoff_min: float = 0.5
    # Seconds the reconnect backoff grows to at most.
    mcp_backoff_max: float = 30.0
    # How often a connected server is probed (a dead stdio server is found without a call).
    mcp_probe_interval: float = 15.0
    # Characters of an MCP tool's description kept.
    mcp_max_description_chars: int = 1024
    # The orchestrator's limit per tool call (its setting and default): a server whose own
    # timeout is longer is cut off there first, which start-up warns about.
    tool_timeout: float = Field(default=300.0, validation_alias="CRAYFISH_TOOL_TIMEOUT")
    # Characters of an MCP tool's result kept (head + tail).
    mcp_max_result_chars: int = 50_000
    # `host:port` entries web_fetch may reach although they are not public addresses.
    web_fetch_allow: str = Field(
        default="",
        validation_alias=AliasChoices("CONNECTORS_WEB_FETCH_ALLOW", "CRAYFISH_WEB_FETCH_ALLOW"),
    )
    # Bytes of a fetched body read at most.
    web_fetch_max_bytes: int = 2 * 1024 * 1024
    # Characters of a fetched page's text returned.
    web_fetch_max_chars: int = 50_000
    # Seconds per fetch, redirects included.
    web_fetch_timeout: float = 20.0
    # Redirects a fetch follows.
    web_fetch_max_redirects: int = 5
    # The User-Agent header web_fetch sends.
    web_fetch_user_agent: str = "Crayfish-web_fetch/0.1 (+https://github.com/crayfish)"
    # web_search's provider: searxng, brave, tavily or one registered in the entry-point group
    # crayfish.search_providers; empty: searxng when CRAYFISH_WEB_SEARCH_URL is set, else none.
    web_search_provider: str = Field(
        default="",
        validation_alias=AliasChoices(
            "CONNECTORS_WEB_SEARCH_PROVIDER", "CRAYFISH_WEB_SEARCH_PROVIDER"
        ),
    )
    # The provider's address (SearXNG: the instance; brave/tavily: their API unless set). The
    # operator's choice, so reached directly, also on a private address.
    web_search_url: str = Field(
        default="",
        validation_alias=AliasChoices("CONNECTORS_WEB_SEARCH_URL", "CRAYFISH_WEB_SEARCH_URL"),
    )
    # The provider's API key (brave, tavily).
    web_search_api_key: str = Field(
        default="",
        repr=False,
        validation_alias=AliasChoices(
            "CONNECTORS_WEB_SEARCH_API_KEY", "CRAYFISH_WEB_SEARCH_API_KEY"
        ),
    )
    # Results per web_search call at most.
    web_search_max_results: int = Field(default=10, ge=1, le=20)
    # Seconds per web_search call, the provider's answer included.
    web_search_timeout: float = Field(default=10.0, gt=0)
    # Seconds a query's results are reused (0: every call asks the provider).
    web_search_cache_seconds: float = Field(default=300.0, ge=0)

    @field_validator("mcp_config", mode="before")
    @classmethod
    def _unset_when_empty(cls, value: Any) -> Any:
        """Compose passes an unset variable as "": that means no MCP servers, not the cwd."""
        return None if isinstance(value, str) and not value.strip() else value
