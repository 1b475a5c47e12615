"""HTTP for search providers: the operator's own address (reached directly, as configured),
one request per call, no redirects, a size cap, every failure a readable SearchFailed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

# A results page is a few kB; this only stops a broken or hostile endpoint from filling memory.
MAX_RESPONSE_BYTES = 2 * 1024 * 1024
USER_AGENT = "Crayfish-web_search/0.1 (+https://github.com/crayfish)"


class SearchFailed(Exception):
    """The search did not give results; the message is for the model (and the user)."""


class RateLimited(SearchFailed):
    """The provider said 429; `retry_after` seconds when it said how long (else None)."""

    def __init__(self, message: str, retry_after: float | None):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class Answer:
    status: int
    headers: httpx.Headers
    body: bytes

    def json(self, label: str) -> Any:
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise SearchFailed(f"{label} answered with something that is not JSON") from exc


class ProviderHttp:
    """One httpx client for the service's life; `timeout` bounds each request (connect, each
    read); web_search bounds the whole call on top."""

    def __init__(self, timeout: float, user_agent: str = USER_AGENT):
        self.client = httpx.AsyncClient(
            timeout=timeout,
            follow_redirects=False,  # a redirect could lead anywhere; the operator set the URL
            headers={"User-Agent": user_agent, "Accept": "application/json"},
            trust_env=False,  # no proxy or netrc from the environment: the configured URL only
        )

    async def request(self, label: str, method: str, url: str, **kwargs: Any) -> Answer:
        """The answer (any status); SearchFailed when the provider cannot be reached."""
        try:
            async with self.client.stream(method, url, **kwargs) as response:
                body = await _read_capped(response, label)
                return Answer(response.status_code, response.headers, body)
        except httpx.TimeoutException as exc:
            raise SearchFailed(f"{label} did not answer in time") from exc
        except httpx.HTTPError as exc:
            reason = type(exc).__name__ if not str(exc) else str(exc)
            raise SearchFailed(f"{label} cannot be reached ({reason})") from exc

    async def close(self) -> None:
        await self.client.aclose()


async def _read_capped(response: httpx.Response, label: str) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise SearchFailed(f"{label} sent more than {MAX_RESPONSE_BYTES} bytes")
        parts.append(chunk)
    return b"".join(parts)


def check(answer: Answer, label: str, refused_hint: str = "") -> None:
    """SearchFailed (RateLimited for 429) unless the answer is a 2xx."""
    status = answer.status
    if 200 <= status < 300:
        return
    if status == 429:
        wait = retry_after(answer.headers)
        when = f"; try again in {wait:g} s" if wait is not None else "; try again later"
        raise RateLimited(f"{label} rate limit reached (HTTP 429){when}", wait)
    if status >= 500:
        raise SearchFailed(f"{label} is unavailable (HTTP {status}); try again later")
    if 300 <= status < 400:
        # Not followed (it could lead anywhere); the operator can point the URL at the target.
        target = " ".join(answer.headers.get("location", "").split())[:200]
        raise SearchFailed(
            f"{label} answered with a redirect (HTTP {status} to {target or 'nowhere'}), not"
            " results; set CRAYFISH_WEB_SEARCH_URL to the address it redirects to"
        )
    detail = _detail(answer.body)
    hint = f"; {refused_hint}" if refused_hint else ""
    raise SearchFailed(f"{label} refused the search (HTTP {status}{detail}){hint}")


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait: Retry-After, else the shortest X-RateLimit-Reset window that is used up
    (Brave sends per-second and per-month windows as "1, 1419")."""
    value = headers.get("retry-after", "").strip()
    if value.replace(".", "", 1).isdigit():
        return float(value)
    resets = _numbers(headers.get("x-ratelimit-reset", ""))
    remaining = _numbers(headers.get("x-ratelimit-remaining", ""))
    spent = [r for r, left in zip(resets, remaining, strict=False) if left <= 0]
    candidates = spent or resets
    return min(candidates) if candidates else None


def _numbers(value: str) -> list[float]:
    found = []
    for part in value.split(","):
        try:
            found.append(float(part.strip()))
        except ValueError:
            continue
    return found


def _detail(body: bytes) -> str:
    """A short reason from an error body (JSON `detail`/`error`/`message`, else its text)."""
    text = body[:2000].decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            text = str(error.get("detail") or error.get("message") or error.get("code") or "")
        else:
            text = str(data.get("detail") or data.get("message") or error)
    text = " ".join(text.split())[:200]
    return f": {text}" if text else ""
