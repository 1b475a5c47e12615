"""Search providers by name: the `crayfish.search_providers` entry-point group (the built-ins
registered there too), and the choice CRAYFISH_WEB_SEARCH_PROVIDER / _URL make.

The contract for a third-party provider (README, "web_search"): a distribution declares
    [project.entry-points."crayfish.search_providers"]
    my-search = "my_package.module:factory"
where `factory(context: ProviderContext) -> SearchProvider` (connectors.search.base) and raises
ProviderUnusable with what to set when the configuration does not suffice;
`CRAYFISH_WEB_SEARCH_PROVIDER=my-search` selects it.
"""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint, entry_points

from connectors.search.base import ProviderContext, ProviderUnusable, SearchProvider

log = logging.getLogger(__name__)

GROUP = "crayfish.search_providers"
OWN_DISTRIBUTION = "crayfish-connectors"
# What services/connectors/pyproject.toml registers; used as is when the package runs from
# source without being installed (no entry points then). A test keeps the two in step.
BUILTINS = {
    "searxng": "connectors.search.searxng:factory",
    "brave": "connectors.search.brave:factory",
    "tavily": "connectors.search.tavily:factory",
}
NOT_CONFIGURED = (
    "web_search is not configured: set CRAYFISH_WEB_SEARCH_URL to a SearXNG instance, or"
    " CRAYFISH_WEB_SEARCH_PROVIDER (brave, tavily) and CRAYFISH_WEB_SEARCH_API_KEY"
)


def registered() -> dict[str, EntryPoint]:
    """Every provider name with its entry point; a built-in name always means the built-in."""
    found: dict[str, EntryPoint] = {}
    own = False
    for ep in entry_points(group=GROUP):
        owner = ep.dist.name if ep.dist is not None else "?"
        if owner == OWN_DISTRIBUTION:
            own = True
        elif ep.name in BUILTINS:
            log.warning("%s registers the built-in search provider %r; ignored", owner, ep.name)
            continue
        found.setdefault(ep.name, ep)
    builtins = {name: EntryPoint(name, target, GROUP) for name, target in BUILTINS.items()}
    return found if own else {**found, **builtins}


def provider_name(provider: str, url: str) -> str | None:
    """The provider to use: the one named, else searxng when a URL is set, else None."""
    name = provider.strip().lower()
    if name:
        return name
    return "searxng" if url.strip() else None


def make_provider(name: str | None, context: ProviderContext) -> SearchProvider:
    """The configured provider; ProviderUnusable says why there is none."""
    if name is None:
        raise ProviderUnusable(NOT_CONFIGURED)
    entries = registered()
    if name not in entries:
        raise ProviderUnusable(
            f"unknown CRAYFISH_WEB_SEARCH_PROVIDER {name!r}; registered: "
            f"{', '.join(sorted(entries))} (entry-point group {GROUP!r})"
        )
    try:
        return entries[name].load()(context)  # type: ignore[no-any-return]
    except ProviderUnusable:
        raise
    except Exception as exc:  # a third-party provider's bug must not stop the service
        log.exception("search provider %r failed to start", name)
        raise ProviderUnusable(f"search provider {name!r} failed to start: {exc}") from exc
