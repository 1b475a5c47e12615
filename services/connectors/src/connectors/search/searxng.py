"""SearXNG, the self-hoster's own metasearch instance: GET /search?q=…&format=json."""

from __future__ import annotations

from connectors.search.base import ProviderContext, ProviderUnusable, SearchHit, base_url, hits_from
from connectors.search.http import ProviderHttp, check

LABEL = "SearXNG"
# An instance answers 403 to format=json unless its settings.yml lists json under search.formats.
FORMAT_HINT = "is the json format enabled (search.formats in the instance's settings.yml)?"


class SearXNG:
    label = LABEL

    def __init__(self, url: str, http: ProviderHttp):
        self.endpoint = f"{url}/search"
        self.http = http

    async def search(self, query: str, count: int, freshness: str | None) -> list[SearchHit]:
        params = {"q": query, "format": "json"}
        if freshness:
            params["time_range"] = freshness  # SearXNG's own names: day, week, month, year
        answer = await self.http.request(LABEL, "GET", self.endpoint, params=params)
        check(answer, LABEL, FORMAT_HINT if answer.status == 403 else "")
        data = answer.json(LABEL)
        results = data.get("results") if isinstance(data, dict) else None
        # No count parameter: the whole page of hits; web_search keeps the first usable ones.
        return hits_from(results, "content", LABEL)


def factory(context: ProviderContext) -> SearXNG:
    if not context.url:
        raise ProviderUnusable(
            "searxng needs the instance's address: set CRAYFISH_WEB_SEARCH_URL"
            " (e.g. http://searxng:8080)"
        )
    return SearXNG(base_url(context, "", "searxng"), context.http)
