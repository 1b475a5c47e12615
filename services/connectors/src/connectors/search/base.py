"""The contract between web_search and a search provider: hits, context, failures."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from connectors.search.http import ProviderHttp, SearchFailed

# What the model may ask for; each provider maps it to its own parameter.
FRESHNESS = ("day", "week", "month", "year")


@dataclass(frozen=True)
class SearchHit:
    """One result as the provider gave it (untrusted text, cleaned later)."""

    title: str
    url: str
    snippet: str


@dataclass(frozen=True)
class ProviderContext:
    """What a provider factory is given. `url` is CRAYFISH_WEB_SEARCH_URL ("" when unset: the
    provider's public endpoint); `http` carries the time and size caps."""

    url: str
    api_key: str = field(repr=False)
    http: ProviderHttp


class SearchProvider(Protocol):
    """Answers one query with about `count` hits (web_search keeps the first `count` usable
    ones), only recent ones when `freshness` is set."""

    label: str  # for messages: "SearXNG", "Brave Search", ...

    async def search(self, query: str, count: int, freshness: str | None) -> list[SearchHit]: ...


ProviderFactory = Callable[[ProviderContext], SearchProvider]


class ProviderUnusable(Exception):
    """The provider cannot run with this configuration (no URL, no key); the message says what
    to set. web_search is then not offered."""


def hits_from(items: object, snippet_key: str, label: str) -> list[SearchHit]:
    """Hits from a provider's result list (dicts with title, url and `snippet_key`); entries
    without a string URL are skipped, a list that is not one is a failure."""
    if not isinstance(items, list):
        raise SearchFailed(f"{label} answered without a result list")
    hits = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        title, snippet = item.get("title"), item.get(snippet_key)
        hits.append(
            SearchHit(
                title if isinstance(title, str) else "",
                item["url"],
                snippet if isinstance(snippet, str) else "",
            )
        )
    return hits


def base_url(context: ProviderContext, default: str, provider: str) -> str:
    """The configured URL (or the provider's own), without a trailing slash; http(s) only."""
    url = (context.url or default).rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ProviderUnusable(
            f"CRAYFISH_WEB_SEARCH_URL for {provider} must start with http:// or https://"
        )
    return url


def api_key(context: ProviderContext, provider: str) -> str:
    if not context.api_key:
        raise ProviderUnusable(f"{provider} needs an API key: set CRAYFISH_WEB_SEARCH_API_KEY")
    return context.api_key
