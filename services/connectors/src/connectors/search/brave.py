"""Brave Search API: GET /res/v1/web/search with the X-Subscription-Token header."""

from __future__ import annotations

from connectors.search.base import ProviderContext, SearchHit, api_key, base_url, hits_from
from connectors.search.http import ProviderHttp, check

LABEL = "Brave Search"
DEFAULT_URL = "https://api.search.brave.com"
MAX_COUNT = 20  # the API's own cap
FRESHNESS = {"day": "pd", "week": "pw", "month": "pm", "year": "py"}


class Brave:
    label = LABEL

    def __init__(self, url: str, key: str, http: ProviderHttp):
        self.endpoint = f"{url}/res/v1/web/search"
        self.headers = {"X-Subscription-Token": key}
        self.http = http

    async def search(self, query: str, count: int, freshness: str | None) -> list[SearchHit]:
        params = {"q": query, "count": str(min(count, MAX_COUNT))}
        if freshness:
            params["freshness"] = FRESHNESS[freshness]
        answer = await self.http.request(
            LABEL, "GET", self.endpoint, params=params, headers=self.headers
        )
        refused = "check CRAYFISH_WEB_SEARCH_API_KEY" if answer.status in (401, 403, 422) else ""
        check(answer, LABEL, refused)
        data = answer.json(LABEL)
        web = data.get("web") if isinstance(data, dict) else None
        if web is None and isinstance(data, dict):
            return []  # no web section: nothing found
        results = web.get("results") if isinstance(web, dict) else None
        return hits_from(results, "description", LABEL)


def factory(context: ProviderContext) -> Brave:
    key = api_key(context, "brave")
    return Brave(base_url(context, DEFAULT_URL, "brave"), key, context.http)
