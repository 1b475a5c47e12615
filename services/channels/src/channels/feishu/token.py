"""Feishu's tenant_access_token (`POST /open-apis/auth/v3/tenant_access_token/internal`),
fetched on the service's loop with httpx and kept until ten minutes before it expires.

Not lark-oapi's TokenManager: the SDK fetches the token inside every call (`verify`, before
its own awaits) with blocking `requests`, so a slow or hung token endpoint would stall the
service's whole event loop, and every other channel with it, for up to the call timeout on
each call. The SDK's client is built with `enable_set_token` and handed this token per call."""

from __future__ import annotations

import asyncio
import time

import httpx

from channels.contract import PlatformRefused, RetryLater

RETRY = 2.0
EARLY = 600.0  # renew this many seconds before Feishu says the token expires (as the SDK)
# Feishu's codes for a token it no longer takes (expired early, or the app was reset).
LIMIT = 99991400  # Feishu's rate limit
STALE = frozenset({99991661, 99991663, 99991664})


class TenantToken:
    def __init__(
        self, http: httpx.AsyncClient, domain: str, app_id: str, app_secret: str, timeout: float
    ):
        self.http, self.domain, self.timeout = http, domain, timeout
        self.credentials = {"app_id": app_id, "app_secret": app_secret}
        self._lock = asyncio.Lock()
        self._token = ""
        self._until = 0.0

    async def get(self) -> str:
        """The token; RetryLater when Feishu does not give one in time, PlatformRefused when
        it refuses the app's credentials."""
        try:
            async with asyncio.timeout(self.timeout), self._lock:
                if not self._token or time.monotonic() >= self._until:
                    self._token, self._until = await self._fetch()
                return self._token
        except TimeoutError:
            raise RetryLater("Feishu's token endpoint did not answer in time", RETRY) from None

    def forget(self, token: str) -> None:
        """Feishu refused this token: the next call fetches a new one."""
        if token == self._token:
            self._token = ""

    async def _fetch(self) -> tuple[str, float]:
        url = f"{self.domain}/open-apis/auth/v3/tenant_access_token/internal"
        try:
            response = await self.http.post(url, json=self.credentials)
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise RetryLater(f"Feishu's token endpoint: {exc}", RETRY) from exc
        token = str(body.get("tenant_access_token") or "")
        if body.get("code") == 0 and token:
            expire = float(body.get("expire") or 0)
            return token, time.monotonic() + max(expire - EARLY, 60.0)
        why = f"{body.get('code')} {body.get('msg')}"
        if response.status_code == 429 or response.status_code >= 500 or body.get("code") == LIMIT:
            raise RetryLater(f"Feishu's token endpoint: {why}", RETRY)
        raise PlatformRefused(f"Feishu refused the app credentials: {why}")
