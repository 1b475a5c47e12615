"""The guard proxy on its own: one lookup and a pinned connection, one request per connection."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from browser.proxy import GuardProxy
from crayfish_common.url_guard import AllowList

from .conftest import Site


class CountingResolver:
    """Names only this resolver knows, so a second lookup by anyone else would fail."""

    def __init__(self, names: dict[str, str]):
        self.names = names
        self.calls: list[str] = []

    def __call__(self, host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        self.calls.append(host)
        if host not in self.names:
            return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (self.names[host], port))]


@pytest.fixture
async def proxy_port(site: Site) -> AsyncIterator[tuple[int, list[str], CountingResolver]]:
    refused: list[str] = []
    resolver = CountingResolver({"shop.test": "127.0.0.1"})
    allow = AllowList.parse(site.url.removeprefix("http://"))
    proxy = GuardProxy(allow, lambda what, why: refused.append(f"{what}: {why}"), resolver)
    url = await proxy.start()
    yield int(url.rsplit(":", 1)[1]), refused, resolver
    await proxy.close()


async def exchange(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer


async def test_a_name_is_resolved_once_and_the_checked_address_is_dialled(proxy_port, site: Site):
    port, refused, resolver = proxy_port
    site_port = site.url.rsplit(":", 1)[1]
    answer = await exchange(
        port, f"GET http://shop.test:{site_port}/form HTTP/1.1\r\nHost: shop.test\r\n\r\n".encode()
    )
    assert answer.startswith(b"HTTP/1.1 200") and b"Sign up" in answer
    assert resolver.calls == ["shop.test"]  # the system resolver does not know shop.test
    assert b"Connection: close" in answer.split(b"\r\n\r\n", 1)[0]
    assert refused == []


async def test_a_second_request_on_the_connection_never_reaches_its_host(proxy_port, site: Site):
    port, _, _ = proxy_port
    private = site.private_url.removeprefix("http://")
    first = f"GET {site.url}/form HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    second = f"GET http://{private}/admin HTTP/1.1\r\nHost: {private}\r\n\r\n"
    answer = await exchange(port, (first + second).encode())
    assert answer.count(b"HTTP/1.1 ") == 1 and b"Sign up" in answer
    assert site.private_hits == []


async def test_refusals_are_reported_and_answered_403(proxy_port, site: Site):
    port, refused, _ = proxy_port
    private = site.private_url.removeprefix("http://")
    tunnel = await exchange(port, f"CONNECT {private} HTTP/1.1\r\nHost: {private}\r\n\r\n".encode())
    chunked = await exchange(
        port,
        f"POST {site.url}/form HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".encode(),
    )
    assert tunnel.startswith(b"HTTP/1.1 403") and chunked.startswith(b"HTTP/1.1 403")
    assert "loopback address" in refused[0] and "Transfer-Encoding" in refused[1]
    assert site.private_hits == []
