"""A webhook receiver on loopback: records each POST (path, headers, body) and answers with
the statuses scripted for its path (then 200), so tests can check deliveries and retries."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Delivery:
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    at: float  # time.monotonic()

    def json(self) -> Any:
        return json.loads(self.body)

    def signed_with(self, secret: str) -> bool:
        """True when X-Crayfish-Signature is the HMAC-SHA256 of the body under `secret`."""
        expected = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(self.headers.get("x-crayfish-signature", ""), expected)


class WebhookReceiver:
    """`url(path)` for a webhook setting; `fail(path, 500, 503)` scripts its next answers."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self._statuses: dict[str, deque[int]] = defaultdict(deque)
        self._cond = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self.base_url = ""

    def __enter__(self) -> WebhookReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                status = receiver._record(Delivery(self.path, headers, body, time.monotonic()))
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def fail(self, path: str, *statuses: int) -> None:
        self._statuses[path].extend(statuses)

    def _record(self, delivery: Delivery) -> int:
        with self._cond:
            self.deliveries.append(delivery)
            self._cond.notify_all()
            queue = self._statuses[delivery.path]
            return queue.popleft() if queue else 200

    def to(self, path: str) -> list[Delivery]:
        return [d for d in self.deliveries if d.path == path]

    def wait_for(self, path: str, count: int, timeout: float = 30.0) -> list[Delivery]:
        """The first `count` deliveries to `path`; fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.to(path)) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(self.to(path))} of {count} POSTs to {path}")
                self._cond.wait(left)
            return self.to(path)[:count]
