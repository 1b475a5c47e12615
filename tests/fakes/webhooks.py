"""A webhook receiver on loopback: records each POST (path, headers, body) and answers with
the statuses scripted for its path (then 200), so tests can check deliveries and retries; and
the receiver's side of the signature (Standard Webhooks: id, timestamp, body), as the README's
verifier does it."""

from __future__ import annotations

import base64
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

    def signed_with(self, secret: str, now: float | None = None, tolerance: float = 300) -> bool:
        """True when the signature holds under `secret` and the timestamp is within
        `tolerance` seconds of `now` (a captured delivery sent again later fails)."""
        return webhook_problem(secret, self.headers, self.body, now, tolerance) is None


def webhook_problem(
    secret: str,
    headers: dict[str, str],
    body: bytes,
    now: float | None = None,
    tolerance: float = 300,
) -> str | None:
    """Why a delivery does not verify (None: it does): `webhook-signature` is
    `v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">`."""
    delivery_id = headers.get("webhook-id", "")
    stamp = headers.get("webhook-timestamp", "")
    if not delivery_id or not stamp.isdigit():
        return "no webhook-id or webhook-timestamp"
    if abs((time.time() if now is None else now) - int(stamp)) > tolerance:
        return "timestamp outside the tolerance"
    key = secret.encode()
    if secret.startswith("whsec_"):
        key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{delivery_id}.{stamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    for candidate in headers.get("webhook-signature", "").split():
        version, _, signature = candidate.partition(",")
        if version == "v1" and hmac.compare_digest(signature, expected):
            return None
    return "bad signature"


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
