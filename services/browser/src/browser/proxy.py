"""The forward proxy Chromium is forced through: every request the page makes passes the SSRF guard.

Chromium sends every request of a context here (`--proxy-bypass-list=<-loopback>` keeps loopback
and link-local from bypassing it): plain http as absolute-form requests, https and WebSockets as
CONNECT tunnels. The target's name is resolved once, every address is checked by
`crayfish_common.url_guard`, and the connection goes to the checked addresses only, so a name
cannot resolve to a public address for the check and a private one for the connection.
One listener per browser context, so a refusal is reported to the session that caused it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass

from crayfish_common.url_guard import (
    AllowList,
    Resolver,
    Target,
    UrlRefused,
    parse_target,
    vet_target,
)

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 64 * 1024
CONNECT_TIMEOUT = 10.0
# Headers meant for the proxy (or this hop only), never forwarded to the server.
HOP_HEADERS = {b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive"}
# Called with (what was asked, why it was refused).
RefusalSink = Callable[[str, str], None]


@dataclass(frozen=True)
class ProxyRequest:
    """The head of one request to the proxy: method, target and the headers to pass on."""

    method: str
    target: str
    version: str
    headers: list[tuple[bytes, bytes]]

    def header(self, name: bytes) -> bytes | None:
        return next((v for k, v in self.headers if k.lower() == name), None)


class GuardProxy:
    """An HTTP/CONNECT proxy on a loopback port that connects only where the guard allows."""

    def __init__(
        self,
        allow: AllowList,
        on_refused: RefusalSink,
        resolver: Resolver = socket.getaddrinfo,
    ):
        self.allow = allow
        self.on_refused = on_refused
        self.resolver = resolver
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        """Listens on 127.0.0.1 (a free port); returns the proxy's URL for Chromium."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._one_request(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except Exception:  # one broken connection must not stop the proxy
            log.exception("proxy connection failed")
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """One request per client connection: a second one could name another host."""
        request = parse_head(await reader.readuntil(b"\r\n\r\n"))
        if request is None:
            await _answer(writer, 400, "Bad Request")
            return
        try:
            target = self._target(request)
            vetted = await asyncio.to_thread(vet_target, target, self.allow, self.resolver)
        except UrlRefused as exc:
            self.on_refused(_shown(request), str(exc))
            await _answer(writer, 403, "Forbidden by the SSRF guard")
            return
        upstream = await _connect(vetted.addresses, target.port)
        if upstream is None:
            await _answer(writer, 502, "Bad Gateway")
            return
        up_reader, up_writer = upstream
        try:
            if request.method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
                await _pipe_both(reader, writer, up_reader, up_writer)
            else:
                await self._forward(request, reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()

    def _target(self, request: ProxyRequest) -> Target:
        if request.method == "CONNECT":
            host, sep, port = request.target.rpartition(":")
            if not sep or not port.isdigit():
                raise UrlRefused(f"CONNECT to {request.target!r}: not host:port")
            return parse_target(f"https://{host}:{port}/")
        if request.header(b"transfer-encoding") is not None:
            # The body's length must be known, or bytes after it could be a second request.
            raise UrlRefused("request bodies with Transfer-Encoding are not proxied")
        return parse_target(request.target)

    async def _forward(
        self,
        request: ProxyRequest,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        """Sends the request in origin form with exactly its body, then the answer back."""
        up_writer.write(origin_form(request))
        length = int(request.header(b"content-length") or b"0")
        if length:
            up_writer.write(await reader.readexactly(length))
        await up_writer.drain()
        # The answer says `Connection: close` too, so Chromium never sends a second request
        # (maybe to another host) on this connection.
        writer.write(closing_head(await up_reader.readuntil(b"\r\n\r\n")))
        await _pipe(up_reader, writer)


def parse_head(head: bytes) -> ProxyRequest | None:
    """The request line and headers; None when they are not HTTP/1.x."""
    if len(head) > MAX_HEAD_BYTES:
        return None
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        return None
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(b":")
        if not sep:
            return None
        headers.append((name.strip(), value.strip()))
    method, target, version = (p.decode("latin-1") for p in parts)
    return ProxyRequest(method.upper(), target, version, headers)


def origin_form(request: ProxyRequest) -> bytes:
    """The request as the server expects it: path only, hop headers dropped, one request."""
    after_scheme = request.target.split("://", 1)[1]
    path = "/" + after_scheme.split("/", 1)[1] if "/" in after_scheme else "/"
    lines = [f"{request.method} {path} {request.version}".encode("latin-1")]
    lines += [k + b": " + v for k, v in request.headers if k.lower() not in HOP_HEADERS]
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


def closing_head(head: bytes) -> bytes:
    """A response head with its hop headers replaced by `Connection: close`."""
    lines = [line for line in head.split(b"\r\n") if line]
    kept = [lines[0]] + [
        line for line in lines[1:] if line.partition(b":")[0].strip().lower() not in HOP_HEADERS
    ]
    return b"\r\n".join([*kept, b"Connection: close"]) + b"\r\n\r\n"


async def _connect(
    addresses: tuple[str, ...], port: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """A connection to the first checked address that answers (never a new lookup)."""
    for address in addresses:
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                return await asyncio.open_connection(address, port)
        except (OSError, TimeoutError):
            continue
    return None


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()


async def _pipe_both(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """Bytes both ways until either side closes."""
    tasks = [
        asyncio.create_task(_pipe(reader, up_writer)),
        asyncio.create_task(_pipe(up_reader, writer)),
    ]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str) -> None:
    body = f"{status} {reason}\n".encode()
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(ConnectionError):
        await writer.drain()


def _shown(request: ProxyRequest) -> str:
    return request.target if request.method != "CONNECT" else f"{request.target} (tunnel)"
