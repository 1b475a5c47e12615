"""Fakes of the web search APIs web_search speaks, on one loopback HTTP server: SearXNG's JSON
API (GET /search), Brave Search (GET /res/v1/web/search) and Tavily (POST /search), each
answering in its own format and rejecting what the real one rejects (a missing or wrong key, a
disabled JSON format, bad parameters), with Brave's rate-limit headers and 429."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

SEARXNG_TIME_RANGES = {"day", "week", "month", "year"}
BRAVE_FRESHNESS = {"pd", "pw", "pm", "py"}
TAVILY_TIME_RANGES = {"day", "week", "month", "year", "d", "w", "m", "y"}
BRAVE_MAX_COUNT = 20
TAVILY_MAX_RESULTS = 20


@dataclass(frozen=True)
class Page:
    title: str
    url: str
    snippet: str
    age_days: int = 0  # how old: freshness filters on it


@dataclass(frozen=True)
class Seen:
    """One request as it arrived: method, path, query parameters, lower-case headers, body."""

    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)


class FakeSearchApis:
    """`base_url` for CRAYFISH_WEB_SEARCH_URL; `add(...)` pages a query matches (every query
    word in the title or snippet); `brave_token` / `tavily_key` the keys they accept;
    `json_format=False` makes SearXNG answer 403 to format=json as an instance without json
    in search.formats does; `brave_per_second` the rate Brave allows; `fail(status, times)`,
    `delay` script outages."""

    def __init__(
        self, brave_token: str = "brave-test-token", tavily_key: str = "tvly-test", port: int = 0
    ):
        self.port = port
        self.brave_token = brave_token
        self.tavily_key = tavily_key
        self.json_format = True
        self.brave_per_second = 1000
        self.delay = 0.0
        self.redirect_to = "http://169.254.169.254/latest/meta-data/"
        self.pages: list[Page] = []
        self.requests: list[Seen] = []
        self._failures: list[int] = []
        self._brave_calls: list[float] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.base_url = ""

    def add(self, title: str, url: str, snippet: str, age_days: int = 0) -> None:
        self.pages.append(Page(title, url, snippet, age_days))

    def fail(self, status: int, times: int = 1) -> None:
        """The next `times` requests get `status` (a provider's outage; a 3xx redirects to
        `redirect_to`) with an HTML body."""
        self._failures.extend([status] * times)

    def matching(self, query: str, max_age_days: int | None = None) -> list[Page]:
        words = query.lower().split()
        return [
            page
            for page in self.pages
            if all(w in f"{page.title} {page.snippet}".lower() for w in words)
            and (max_age_days is None or page.age_days <= max_age_days)
        ]

    def __enter__(self) -> FakeSearchApis:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake._handle(self, "GET")

            def do_POST(self) -> None:
                fake._handle(self, "POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Closes the port: the provider is then unreachable."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        params = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in handler.headers.items()}
        seen = Seen(method, parts.path, params, headers, body)
        with self._lock:
            self.requests.append(seen)
            failure = self._failures.pop(0) if self._failures else None
        if self.delay:
            time.sleep(self.delay)
        if failure is not None:
            location = {"Location": self.redirect_to} if 300 <= failure < 400 else {}
            page = b"<html><body>Service Unavailable</body></html>"
            _reply(handler, failure, page, "text/html", location)
        elif method == "GET" and parts.path == "/search":
            self._searxng(handler, params)
        elif method == "GET" and parts.path == "/res/v1/web/search":
            self._brave(handler, seen)
        elif method == "POST" and parts.path == "/search":
            self._tavily(handler, seen)
        else:
            _reply(handler, 404, b"Not Found", "text/plain")

    def _searxng(self, handler: BaseHTTPRequestHandler, params: dict[str, str]) -> None:
        fmt = params.get("format", "html")
        if fmt != "html" and (fmt != "json" or not self.json_format):
            _reply(handler, 403, b"<html><body>403 Forbidden</body></html>", "text/html")
            return
        query = params.get("q", "").strip()
        time_range = params.get("time_range", "")
        if not query or (time_range and time_range not in SEARXNG_TIME_RANGES):
            _reply(handler, 400, b"<html><body>Bad Request</body></html>", "text/html")
            return
        if fmt == "html":
            _reply(handler, 200, b"<html><body>results page</body></html>", "text/html")
            return
        max_age = {"day": 1, "week": 7, "month": 31, "year": 366}.get(time_range)
        pages = self.matching(query, max_age)
        answer = {
            "query": query,
            "number_of_results": len(pages),
            "results": [
                {
                    "url": p.url,
                    "title": p.title,
                    "content": p.snippet,
                    "engine": "fake",
                    "engines": ["fake"],
                    "parsed_url": list(urlsplit(p.url)),
                    "template": "default.html",
                    "positions": [i + 1],
                    "score": 1.0 / (i + 1),
                    "category": "general",
                }
                for i, p in enumerate(pages)
            ],
            "answers": [],
            "corrections": [],
            "infoboxes": [],
            "suggestions": [],
            "unresponsive_engines": [],
        }
        _reply_json(handler, 200, answer)

    def _brave(self, handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        token = seen.headers.get("x-subscription-token", "")
        if token != self.brave_token:
            _reply_json(handler, 422, _brave_error(422, "SUBSCRIPTION_TOKEN_INVALID"))
            return
        now = time.monotonic()
        with self._lock:
            self._brave_calls = [t for t in self._brave_calls if now - t < 1.0]
            allowed = len(self._brave_calls) < self.brave_per_second
            if allowed:
                self._brave_calls.append(now)
            remaining = self.brave_per_second - len(self._brave_calls)
        limits = {
            "X-RateLimit-Limit": f"{self.brave_per_second}, 15000",
            "X-RateLimit-Remaining": f"{remaining}, 14000",
            "X-RateLimit-Reset": "1, 1419",
        }
        if not allowed:
            _reply_json(handler, 429, _brave_error(429, "RATE_LIMITED"), limits)
            return
        query = seen.params.get("q", "")
        count = seen.params.get("count", "20")
        freshness = seen.params.get("freshness")
        if (
            not query
            or not count.isdigit()
            or not 1 <= int(count) <= BRAVE_MAX_COUNT
            or (freshness is not None and freshness not in BRAVE_FRESHNESS)
        ):
            _reply_json(handler, 422, _brave_error(422, "VALIDATION"), limits)
            return
        max_age = {"pd": 1, "pw": 7, "pm": 31, "py": 366}.get(freshness or "")
        pages = self.matching(query, max_age)[: int(count)]
        answer: dict[str, Any] = {"type": "search", "query": {"original": query}}
        if pages:
            answer["web"] = {
                "type": "search",
                "results": [
                    {
                        "title": p.title,
                        "url": p.url,
                        "description": p.snippet,
                        "type": "search_result",
                    }
                    for p in pages
                ],
            }
        _reply_json(handler, 200, answer, limits)

    def _tavily(self, handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        if seen.headers.get("authorization", "") != f"Bearer {self.tavily_key}":
            _reply_json(
                handler, 401, {"detail": {"error": "Unauthorized: missing or invalid API key."}}
            )
            return
        try:
            request = json.loads(seen.body)
        except ValueError:
            request = None
        if not isinstance(request, dict) or not isinstance(request.get("query"), str):
            _reply_json(handler, 400, {"detail": {"error": "query is required"}})
            return
        max_results = request.get("max_results", 5)
        time_range = request.get("time_range")
        if (
            not isinstance(max_results, int)
            or not 0 <= max_results <= TAVILY_MAX_RESULTS
            or (time_range is not None and time_range not in TAVILY_TIME_RANGES)
        ):
            _reply_json(handler, 400, {"detail": {"error": "invalid parameters"}})
            return
        max_age = {"day": 1, "week": 7, "month": 31, "year": 366}.get(time_range or "")
        pages = self.matching(request["query"], max_age)[:max_results]
        answer = {
            "query": request["query"],
            "answer": None,
            "images": [],
            "results": [
                {
                    "title": p.title,
                    "url": p.url,
                    "content": p.snippet,
                    "score": 0.9,
                    "raw_content": None,
                }
                for p in pages
            ],
            "response_time": 0.01,
        }
        _reply_json(handler, 200, answer)


def _brave_error(status: int, code: str) -> dict[str, Any]:
    return {
        "type": "ErrorResponse",
        "error": {"id": "fake", "status": status, "code": code, "detail": f"{code} (fake)"},
    }


def _reply_json(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: Any,
    headers: dict[str, str] | None = None,
) -> None:
    _reply(handler, status, json.dumps(body).encode(), "application/json", headers)


def _reply(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: bytes,
    kind: str,
    headers: dict[str, str] | None = None,
) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(body)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)
