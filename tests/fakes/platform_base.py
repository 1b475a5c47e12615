"""What the chat platforms' fakes share: one lock to wait on with 429 floods, hung calls and
held acknowledgements kept under it, loopback servers (HTTP, WebSocket) run in a thread, and
an HTTP handler that reads JSON, form and multipart bodies."""

from __future__ import annotations

import asyncio
import email.parser
import email.policy
import json
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar
from urllib.parse import parse_qsl

from aiohttp import web
from websockets.sync.server import Server, ServerConnection, serve

T = TypeVar("T")


class FakePlatform:
    """A platform fake's state under one lock: the calls it answered, the 429s it owes, the
    calls it never answers (until it stops) and whether acknowledgements get lost."""

    label = "platform"  # in the timeout message: "fake Telegram: timed out"

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.calls: list[Any] = []
        self.floods: dict[str, list[float]] = {}  # call → the retry_after of its next 429s
        self.hung: set[tuple[str, Any]] = set()  # (call, chat or None for any chat)
        self.hold_acks = False  # acknowledgements are lost on the way
        self.released = threading.Event()  # set when the fake stops: hung calls end

    def flood(self, call: str, *retry_after: float) -> None:
        """The next `call`s answer 429 with these retry_after values."""
        with self.lock:
            self.floods.setdefault(call, []).extend(retry_after)

    def hang(self, call: str, chat: Any = None) -> None:
        """`call` (in `chat`, or any) never answers until the fake stops."""
        with self.lock:
            self.hung.add((call, chat))

    def next_flood(self, call: str) -> float | None:
        """The retry_after of the 429 `call` owes now, if it owes one."""
        with self.lock:
            waits = self.floods.get(call)
            return waits.pop(0) if waits else None

    def is_hung(self, call: str, chat: Any = None) -> bool:
        with self.lock:
            return (call, None) in self.hung or (call, chat) in self.hung

    def wait_for(self, check: Callable[[], Any], timeout: float = 30.0) -> Any:
        """Waits until check() (called under the lock) is truthy; returns it."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while not (result := check()):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"fake {self.label}: timed out; calls: {self.calls[-8:]}")
                self.lock.wait(min(left, 0.1))
            return result

    def release(self) -> None:
        """Ends what waits for the fake to stop: hung calls and held acknowledgements."""
        self.released.set()
        with self.lock:
            self.hold_acks = False
            self.lock.notify_all()


class AioServer:
    """An aiohttp app on its own event loop in a thread, on loopback addresses."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.runner: web.AppRunner | None = None

    def start(self, app: web.Application, *hosts: str) -> list[int]:
        """Serves `app` on a free port of each host (127.0.0.1 when none); their ports."""
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        return self.run(self._start(app, hosts or ("127.0.0.1",)))

    async def _start(self, app: web.Application, hosts: tuple[str, ...]) -> list[int]:
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        for host in hosts:
            await web.TCPSite(self.runner, host, 0).start()
        return [int(address[1]) for address in self.runner.addresses]

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Runs `work` on the server's loop and waits for its result."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(10)

    def stop(self, closing: Callable[[], Awaitable[None]] | None = None) -> None:
        """Runs `closing` (e.g. closes the open WebSockets), then stops the server and loop."""

        async def stop() -> None:
            if closing is not None:
                await closing()
            if self.runner is not None:
                await self.runner.cleanup()

        self.run(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)


def start_http(handler: type[BaseHTTPRequestHandler], **attrs: Any) -> ThreadingHTTPServer:
    """An HTTP server on a free loopback port, serving in a thread; `attrs` are set on a
    subclass of `handler` (the fake it answers for)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (handler,), attrs))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def stop_http(server: ThreadingHTTPServer | None) -> None:
    if server is not None:
        server.shutdown()
        server.server_close()


def http_url(server: ThreadingHTTPServer | None) -> str:
    assert server is not None, "the fake is not started"
    return f"http://127.0.0.1:{server.server_address[1]}"


def start_ws(handler: Callable[[ServerConnection], None]) -> Server:
    """A WebSocket server on a free loopback port, serving in a thread."""
    server = serve(handler, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def ws_url(server: Server | None) -> str:
    assert server is not None, "the fake is not started"
    return f"ws://127.0.0.1:{server.socket.getsockname()[1]}"


@dataclass(frozen=True)
class Upload:
    """A file sent as a multipart part with a file name."""

    filename: str
    content_type: str
    data: bytes


def request_fields(content_type: str, body: bytes) -> dict[str, Any]:
    """A request body's fields, by its content type: JSON, multipart/form-data (a part with a
    file name as an Upload) or urlencoded. ValueError when it cannot be parsed."""
    if not body:
        return {}
    if "json" in content_type:
        fields = json.loads(body)
        if not isinstance(fields, dict):
            raise ValueError("the JSON body is not an object")
        return fields
    if content_type.startswith("multipart/form-data"):
        return _multipart(content_type, body)
    return dict(parse_qsl(body.decode()))


def _multipart(content_type: str, body: bytes) -> dict[str, Any]:
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    parsed = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    if not parsed.is_multipart():
        raise ValueError("can't parse multipart/form-data")
    fields: dict[str, Any] = {}
    for part in parsed.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        if not isinstance(name, str):
            continue
        filename = part.get_filename()
        if filename is None:
            fields[name] = data.decode()
        else:
            fields[name] = Upload(filename, part.get_content_type(), data)
    return fields


class QuietHandler(BaseHTTPRequestHandler):
    """An HTTP/1.1 handler that logs nothing, reads the body and answers once; GET, POST and
    PUT go to `answer`."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.answer(self.command)

    def do_POST(self) -> None:
        self.answer(self.command)

    def do_PUT(self) -> None:
        self.answer(self.command)

    def answer(self, method: str) -> None:
        """What the fake says to a request; the fake's handler overrides it."""
        self.reply(501, b"")

    def body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def reply(
        self,
        status: int,
        data: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up (a timeout): nothing to answer
