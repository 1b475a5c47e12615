"""The connectors domain façade: MCP bridge, web fetcher and web search, built from settings."""

from __future__ import annotations

import logging

from crayfish_common.guarded_fetch import FetchLimits, WebFetcher
from crayfish_common.tools import Tool, ToolSet
from crayfish_common.url_guard import AllowList

from connectors.config import ConnectorsSettings
from connectors.mcp_bridge import McpBridge, ServerStatus
from connectors.mcp_config import ConfigError, McpConfig, McpServerConfig, load_config
from connectors.mcp_connection import Limits
from connectors.search.base import ProviderContext, ProviderUnusable
from connectors.search.http import ProviderHttp
from connectors.search.registry import make_provider, provider_name
from connectors.search.tool import SearchLimits, WebSearch
from connectors.tools import WebFetch
from connectors.transports import workspace_problem

log = logging.getLogger(__name__)


def read_mcp_config(settings: ConnectorsSettings) -> McpConfig:
    """The configured servers (none without CONNECTORS_MCP_CONFIG); ConfigError if unusable."""
    if settings.mcp_config is None:
        return McpConfig()
    config = load_config(settings.mcp_config, settings.workspace)
    for problem in config.problems:
        log.error("MCP config %s: %s (that server is skipped)", settings.mcp_config, problem)
    for server in config.servers:
        _vet_server(server, settings)
    return config


def _vet_server(server: McpServerConfig, settings: ConnectorsSettings) -> None:
    """ConfigError for a stdio server run from the workspace; a warning for a timeout the
    orchestrator cuts short."""
    problem = workspace_problem(server, settings.workspace) if server.command else None
    if problem:
        raise ConfigError(
            f"MCP config {settings.mcp_config}: server {server.name!r}: {problem}: sandboxed"
            " commands can write there, and this service runs it outside the sandbox; install"
            " the server outside the workspace"
        )
    if server.timeout > settings.tool_timeout:
        log.warning(
            "MCP server %r: its timeout (%g s) is longer than the orchestrator's tool timeout"
            " (CRAYFISH_TOOL_TIMEOUT, %g s): a call that runs past %g s ends there as"
            ' "timed out"; lower its "timeout" or raise CRAYFISH_TOOL_TIMEOUT',
            server.name,
            server.timeout,
            settings.tool_timeout,
            settings.tool_timeout,
        )


def build_fetcher(settings: ConnectorsSettings) -> WebFetcher:
    try:
        allow = AllowList.parse(settings.web_fetch_allow)
    except ValueError as exc:
        raise ConfigError(f"CONNECTORS_WEB_FETCH_ALLOW: {exc}") from exc
    limits = FetchLimits(
        max_bytes=settings.web_fetch_max_bytes,
        timeout=settings.web_fetch_timeout,
        max_redirects=settings.web_fetch_max_redirects,
        user_agent=settings.web_fetch_user_agent,
    )
    return WebFetcher(limits, allow)


def build_web_search(settings: ConnectorsSettings, http: ProviderHttp) -> WebSearch | str:
    """The web_search tool, or why it is not offered (logged: the operator wants to know)."""
    name = provider_name(settings.web_search_provider, settings.web_search_url)
    context = ProviderContext(settings.web_search_url.strip(), settings.web_search_api_key, http)
    try:
        provider = make_provider(name, context)
    except ProviderUnusable as exc:
        (log.info if name is None else log.error)("web_search not offered: %s", exc)
        return str(exc)
    limits = SearchLimits(
        max_results=settings.web_search_max_results,
        timeout=settings.web_search_timeout,
        cache_seconds=settings.web_search_cache_seconds,
    )
    log.info("web_search offered through %s", provider.label)
    return WebSearch(provider, limits)


class ConnectorsCore:
    """Owns the MCP connections; `tool_set()` is current whenever a server's tools change."""

    def __init__(self, settings: ConnectorsSettings):
        self.settings = settings
        config = read_mcp_config(settings)
        self.config_problems = list(config.problems)
        self.broken_servers = dict(config.broken)
        limits = Limits(
            connect_timeout=settings.mcp_connect_timeout,
            backoff_min=settings.mcp_backoff_min,
            backoff_max=settings.mcp_backoff_max,
            probe_interval=settings.mcp_probe_interval,
            max_result_chars=settings.mcp_max_result_chars,
        )
        self.bridge = McpBridge(config, limits, settings.mcp_max_description_chars)
        self.web_fetch = WebFetch(build_fetcher(settings), settings.web_fetch_max_chars)
        self.search_http = ProviderHttp(settings.web_search_timeout)
        search = build_web_search(settings, self.search_http)
        self.web_search = search if isinstance(search, WebSearch) else None
        # Tools held back, with the reason (ListTools reports them; /api/tools shows them).
        self.not_offered = {WebSearch.name: search} if isinstance(search, str) else {}
        self._tool_set: tuple[list[Tool], ToolSet] | None = None

    async def start(self) -> None:
        """Connects to every MCP server, waiting (bounded) for each first attempt."""
        await self.bridge.start(wait=self.settings.mcp_connect_timeout)

    async def stop(self) -> None:
        await self.bridge.stop()
        await self.search_http.close()

    def tool_set(self) -> ToolSet:
        search: list[Tool] = [self.web_search] if self.web_search else []
        tools: list[Tool] = [self.web_fetch, *search, *self.bridge.tools()]
        if self._tool_set is None or self._tool_set[0] != tools:
            self._tool_set = (tools, ToolSet(tools))
        return self._tool_set[1]

    def servers(self) -> list[ServerStatus]:
        statuses = self.bridge.statuses()
        for name, problem in self.broken_servers.items():
            statuses.append(ServerStatus(name, "", "misconfigured", problem, 0))
        return statuses
