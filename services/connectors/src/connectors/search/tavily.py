"""Tavily: POST /search with a JSON body and a Bearer API key."""

from __future__ import annotations

from connectors.search.base import ProviderContext, SearchHit, api_key, base_url, hits_from
from connectors.search.http import ProviderHttp, check

LABEL = "Tavily"
DEFAULT_URL = "https://api.tavily.com"
MAX_COUNT = 20  # the API's own cap


class Tavily:
    label = LABEL

    def __init__(self, url: str, key: str, http: ProviderHttp):
        self.endpoint = f"{url}/search"
        self.headers = {"Authorization": f"Bearer {key}"}
        self.http = http

    async def search(self, query: str, count: int, freshness: str | None) -> list[SearchHit]:
        body: dict[str, object] = {"query": query, "max_results": min(count, MAX_COUNT)}
        if freshness:
            body["time_range"] = freshness  # Tavily's own names: day, week, month, year
        answer = await self.http.request(
            LABEL, "POST", self.endpoint, json=body, headers=self.headers
        )
        refused = "check CRAYFISH_WEB_SEARCH_API_KEY" if answer.status in (401, 403) else ""
        check(answer, LABEL, refused)
        data = answer.json(LABEL)
        results = data.get("results") if isinstance(data, dict) else None
        return hits_from(results, "content", LABEL)


def factory(context: ProviderContext) -> Tavily:
    key = api_key(context, "tavily")
    return Tavily(base_url(context, DEFAULT_URL, "tavily"), key, context.http)
