"""Fetches one http(s) URL safely: every hop vetted, pinned, capped. Used by the connectors
service's `web_fetch` and by the orchestrator for image URLs in messages.

Each URL (the first and every redirect target, at most `max_redirects`) is checked by
`crayfish_common.url_guard` after DNS resolution, and the connection goes to the addresses that
were checked: the network backend ignores the host name and dials the vetted IPs, while TLS
(SNI, certificate check) and the Host header still use the name. So a name cannot resolve to a
public address for the check and to a private one for the connection (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import httpcore

from crayfish_common.url_guard import (
    NO_ALLOW,
    AllowList,
    Resolver,
    UrlRefused,
    VettedTarget,
    vet_url,
)

REDIRECTS = {301, 302, 303, 307, 308}


class FetchError(Exception):
    """The fetch failed; the message says why in words the model can use."""


@dataclass(frozen=True)
class FetchLimits:
    max_bytes: int = 2 * 1024 * 1024
    timeout: float = 20.0
    max_redirects: int = 5
    user_agent: str = "Crayfish-web_fetch/0.1"


@dataclass
class Fetched:
    """The final response: where it came from, its type, and its body (maybe cut at the cap)."""

    url: str
    status: int
    content_type: str
    charset: str | None
    body: bytes
    truncated: bool
    redirects: list[str] = field(default_factory=list)


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """Dials the vetted addresses in order, whatever host name httpcore asks for."""

    def __init__(self, addresses: Iterable[str]):
        self.addresses = list(addresses)
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        last: Exception | None = None
        for address in self.addresses:
            try:
                return await self.inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout, OSError) as exc:
                last = exc
        raise httpcore.ConnectError(f"cannot connect to {host}:{port}: {last}")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class WebFetcher:
    """GET with the guard on every hop; `resolver` is socket.getaddrinfo except in tests."""

    def __init__(
        self,
        limits: FetchLimits,
        allow: AllowList = NO_ALLOW,
        resolver: Resolver = socket.getaddrinfo,
    ):
        self.limits = limits
        self.allow = allow
        self.resolver = resolver
        self.ssl_context = ssl.create_default_context()

    async def fetch(self, url: str) -> Fetched:
        try:
            async with asyncio.timeout(self.limits.timeout):
                return await self._follow(url)
        except TimeoutError as exc:
            raise FetchError(f"no complete answer within {self.limits.timeout:g} s") from exc

    async def _follow(self, url: str) -> Fetched:
        redirects: list[str] = []
        while True:
            try:
                vetted = await asyncio.to_thread(vet_url, url, self.allow, self.resolver)
            except UrlRefused as exc:
                hop = f" (redirected from {redirects[-1]})" if redirects else ""
                raise FetchError(f"{exc}{hop}") from exc
            fetched, location = await self._get(vetted)
            if location is None:
                fetched.redirects = redirects
                return fetched
            if len(redirects) >= self.limits.max_redirects:
                raise FetchError(f"more than {self.limits.max_redirects} redirects")
            redirects.append(url)
            url = urljoin(url, location)

    async def _get(self, vetted: VettedTarget) -> tuple[Fetched, str | None]:
        """One request to the pinned addresses; (response, redirect location or None)."""
        headers = [
            (b"User-Agent", self.limits.user_agent.encode()),
            (b"Accept", b"text/html,text/plain,application/json,*/*;q=0.5"),
            (b"Accept-Encoding", b"gzip, deflate"),
        ]
        pool = httpcore.AsyncConnectionPool(
            ssl_context=self.ssl_context,
            network_backend=PinnedBackend(vetted.addresses),
            max_connections=1,
        )
        try:
            async with pool, pool.stream("GET", vetted.target.url, headers=headers) as response:
                header = {
                    k.decode("latin-1").lower(): v.decode("latin-1") for k, v in response.headers
                }
                if response.status in REDIRECTS and "location" in header:
                    return _empty(vetted.target.url, response.status), header["location"]
                body, truncated = await self._read(response, header.get("content-encoding", ""))
        except httpcore.TimeoutException as exc:
            raise FetchError(f"{vetted.target.host} timed out") from exc
        except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol) as exc:
            raise FetchError(
                f"cannot fetch {vetted.target.url}: {exc or type(exc).__name__}"
            ) from exc
        content_type, charset = _content_type(header.get("content-type", ""))
        return (
            Fetched(vetted.target.url, response.status, content_type, charset, body, truncated),
            None,
        )

    async def _read(self, response: httpcore.Response, encoding: str) -> tuple[bytes, bool]:
        """The body decoded from gzip/deflate, cut at max_bytes (of decoded bytes)."""
        decoder = _decoder(encoding.strip().lower())
        limit = self.limits.max_bytes
        parts: list[bytes] = []
        size = 0
        async for chunk in response.aiter_stream():
            data = decoder.decompress(chunk, limit - size + 1) if decoder else chunk
            parts.append(data)
            size += len(data)
            if size > limit:
                return b"".join(parts)[:limit], True
        return b"".join(parts), False


def _decoder(encoding: str) -> Any:
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    raise FetchError(f"the server sent an encoding this fetcher cannot read ({encoding})")


def _content_type(value: str) -> tuple[str, str | None]:
    parts = [p.strip() for p in value.split(";")]
    charset = None
    for part in parts[1:]:
        key, _, val = part.partition("=")
        if key.strip().lower() == "charset" and val.strip():
            charset = val.strip().strip('"').lower()
    return parts[0].lower(), charset


def _empty(url: str, status: int) -> Fetched:
    return Fetched(url, status, "", None, b"", False)
