"""A scripted OpenAI-compatible chat-completions server that rejects what real providers reject."""

from __future__ import annotations

import json
import logging
import socket
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .completions import (
    ErrorReply,
    Reply,
    ToolCall,
    completion,
    content_chunk,
    count_tokens,
    stream_parts,
)
from .validation import Rejection, validate_request

log = logging.getLogger(__name__)

ReplyFn = Callable[[dict[str, Any]], Reply]
NO_REPLY_LEFT = "fake LLM: no scripted reply left"
ENDLESS_PAUSE = 0.05  # seconds between the deltas of an endless stream
RESET_GRACE = 0.2  # seconds between the last text and a TCP reset


class FakeLLM:
    """Answers POST /v1/chat/completions from a queue of scripted replies, in order."""

    def __init__(
        self,
        *,
        strict_content: bool = False,
        reject_reasoning_content: bool = True,
        model: str = "fake-model",
        prompt_cache: bool = False,
    ) -> None:
        """`prompt_cache`: report `usage.prompt_tokens_details.cached_tokens` as a provider
        with prefix caching would: the tokens of the longest run of leading messages (with
        the same tools) that an earlier request sent byte for byte."""
        self.strict_content = strict_content
        self.prompt_cache = prompt_cache
        self._prefixes: set[str] = set()
        self.reject_reasoning_content = reject_reasoning_content
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.request_times: list[float] = []  # time.monotonic() of each request's arrival
        self.rejections: list[dict[str, Any]] = []
        self._queue: deque[Reply | ReplyFn] = deque()
        self._default: Reply | ReplyFn | None = None
        self._call_count = 0
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeLLM:
        handler = type("_BoundHandler", (_Handler,), {"fake": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting -------------------------------------------------------------------------

    def reply_text(
        self,
        text: str,
        *,
        delay: float = 0.0,
        reasoning: str | None = None,
        usage: dict[str, int] | None = None,
    ) -> None:
        self._enqueue(Reply(text=text, delay=delay, reasoning=reasoning, usage=usage))

    def reply_tool_calls(
        self,
        *calls: tuple[str, dict[str, Any] | str],
        delay: float = 0.0,
        content: str | None = None,
    ) -> list[str]:
        """Queue one answer with these tool calls; returns their ids ("call_<n>")."""
        tool_calls = [self.tool_call(name, arguments) for name, arguments in calls]
        self._enqueue(Reply(text=content, tool_calls=tool_calls, delay=delay))
        return [call.id for call in tool_calls]

    def reply_error(
        self,
        status: int,
        message: str = "fake LLM: scripted error",
        *,
        type: str = "server_error",
        code: str | None = None,
        delay: float = 0.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Queue an HTTP error; `headers` go with it (e.g. {"retry-after": "1"})."""
        error = ErrorReply(status, message, type, code, dict(headers or {}))
        self._enqueue(Reply(error=error, delay=delay))

    def reply_with(self, fn: ReplyFn) -> None:
        """Queue a function that computes the reply from the request body when it arrives."""
        self._enqueue(fn)

    def reply(self, reply: Reply) -> None:
        """Queue a Reply built by hand."""
        self._enqueue(reply)

    def reply_forever_text(self, text: str, *, delay: float = 0.0) -> None:
        """Answer this text whenever the queue is empty (instead of the 'no reply left' 500)."""
        with self._cond:
            self._default = Reply(text=text, delay=delay)

    def reply_forever_with(self, fn: ReplyFn | None) -> None:
        """Compute the answer with fn whenever the queue is empty; None restores the 500."""
        with self._cond:
            self._default = fn

    def reset(self) -> None:
        """Drops every queued reply and the default one (between tests sharing one fake)."""
        with self._cond:
            self._queue.clear()
            self._default = None

    def tool_call(self, name: str, arguments: dict[str, Any] | str) -> ToolCall:
        """A ToolCall with the next id; a dict is JSON-encoded, a str is sent verbatim."""
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        with self._cond:
            self._call_count += 1
            return ToolCall(name=name, arguments=arguments, id=f"call_{self._call_count}")

    @property
    def last_request(self) -> dict[str, Any]:
        with self._cond:
            if not self.requests:
                raise AssertionError("fake LLM received no request")
            return self.requests[-1]

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._queue)

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> dict[str, Any]:
        """Block until at least count requests arrived; return the count-th one."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requests) >= count, timeout):
                raise TimeoutError(f"fake LLM got {len(self.requests)} requests, not {count}")
            return self.requests[count - 1]

    # -- serving (called from handler threads) ---------------------------------------------

    def _enqueue(self, item: Reply | ReplyFn) -> None:
        with self._cond:
            self._queue.append(item)

    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._cond:
            self.requests.append(body)
            self.request_headers.append(headers)
            self.request_times.append(time.monotonic())
            self._cond.notify_all()

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._cond:
            item = self._queue.popleft() if self._queue else self._default
        if item is None:
            return Reply(error=ErrorReply(500, NO_REPLY_LEFT, "server_error", "no_scripted_reply"))
        if isinstance(item, Reply):
            reply = item
        else:
            try:
                reply = item(body)
            except Exception as exc:  # a bug in a test's reply function must be visible
                log.exception("fake LLM reply function failed")
                return Reply(error=ErrorReply(500, f"fake LLM: reply function raised {exc!r}"))
        for call in reply.tool_calls:
            if not call.id:
                call.id = self.tool_call(call.name, call.arguments).id
        return reply

    def cached_tokens(self, body: dict[str, Any]) -> int | None:
        """What a prefix cache would hold of this request (None when not simulating one)."""
        if not self.prompt_cache:
            return None
        tools = json.dumps(body.get("tools"), ensure_ascii=False, sort_keys=False)
        messages = body.get("messages") or []
        keys = [
            tools + json.dumps(messages[: i + 1], ensure_ascii=False) for i in range(len(messages))
        ]
        with self._cond:
            hit = max((i + 1 for i, key in enumerate(keys) if key in self._prefixes), default=0)
            self._prefixes.update(keys)
        return count_tokens(json.dumps(messages[:hit], ensure_ascii=False)) if hit else 0

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless stopping; False once the server is shutting down."""
        if seconds > 0:
            return not self._stopping.wait(seconds)
        return not self._stopping.is_set()


class _Server(ThreadingHTTPServer):
    # The default backlog of 5 drops connection attempts under load (clients then wait a
    # 1 s SYN retransmit), which would make the fake, not Crayfish, the bottleneck.
    request_queue_size = 512

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that drops a kept-alive connection (e.g. after a malformed chunk) is normal.
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            log.debug("fake LLM: %s went away", client_address)
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30
    fake: FakeLLM

    def setup(self) -> None:
        super().setup()
        # Headers and chunks go out as separate small writes: without this, Nagle's algorithm
        # and delayed ACKs add ~40 ms per request, which would swamp every latency we measure.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("fake LLM: " + format, *args)

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            model = {
                "id": self.fake.model,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "fake-llm",
            }
            self._send_json(200, {"object": "list", "data": [model]})
        else:
            self._not_found()

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._not_found()
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
            rejection: Rejection | None = Rejection(
                400,
                "We could not parse the JSON body of your request. (The OpenAI API "
                "expects a JSON payload, but what was sent was not valid JSON.)",
            )
        else:
            rejection = validate_request(
                body,
                strict_content=self.fake.strict_content,
                reject_reasoning_content=self.fake.reject_reasoning_content,
            )
        self.fake._record(body, {k.lower(): v for k, v in self.headers.items()})
        if rejection is not None:
            with self.fake._cond:
                self.fake.rejections.append(rejection.body())
            self._send_json(rejection.status, rejection.body())
            return
        self._answer(body, self.fake._next_reply(body), self.fake.cached_tokens(body))

    def _answer(self, body: dict[str, Any], reply: Reply, cached: int | None) -> None:
        streaming = bool(body.get("stream"))
        if not self.fake._sleep(reply.delay / 2 if streaming and not reply.error else reply.delay):
            return
        if reply.error is not None:
            error = reply.error
            headers = dict(error.headers)
            if error.message == NO_REPLY_LEFT:
                # The openai SDK honours this: an empty script fails the test at once.
                headers["x-should-retry"] = "false"
            self._send_json(error.status, error.body(), headers=headers)
        elif streaming:
            try:
                self._stream(body, reply, cached)
            except (BrokenPipeError, ConnectionResetError):
                log.debug("fake LLM: client went away mid-stream")
                self.close_connection = True
        else:
            self._send_json(200, completion(body, reply, cached))

    def _stream(self, body: dict[str, Any], reply: Reply, cached: int | None) -> None:
        deltas, ending = stream_parts(body, reply, cached)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        pause = reply.delay / 2 / max(1, len(deltas) + len(ending) - 1)
        for i, obj in enumerate(deltas):
            if i and not self.fake._sleep(pause):
                return
            self._write_event(obj)
        if reply.garbage is not None:
            self._write_chunk(f"data: {reply.garbage}\n\n")
        while reply.endless is not None:
            if not self.fake._sleep(ENDLESS_PAUSE):
                return
            self._write_event(content_chunk(deltas[0], reply.endless))
        if reply.cut == "stall":
            self.fake._stopping.wait()
            return
        if reply.cut in ("reset", "close"):
            # A reset discards what the client's kernel holds unread: give the client time to
            # read the text sent so far, or the test sees a stream broken before any text.
            if reply.cut == "reset" and not self.fake._sleep(RESET_GRACE):
                return
            self._break_connection(reset=reply.cut == "reset")
            return
        if not reply.cut:
            for obj in ending:
                if not self.fake._sleep(pause):
                    return
                self._write_event(obj)
            self._write_chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _break_connection(self, reset: bool) -> None:
        """Ends the connection mid-body: with a TCP reset, or a plain close (FIN)."""
        self.close_connection = True
        if reset:
            # Linger 0: close() sends RST instead of FIN. The socket must be closed here, as
            # the server's own shutdown(SHUT_WR) would send a FIN first.
            linger = struct.pack("ii", 1, 0)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            self.rfile.close()
            self.connection.close()

    def _write_event(self, obj: dict[str, Any]) -> None:
        self._write_chunk(f"data: {json.dumps(obj, ensure_ascii=False)}\n\n")

    def _write_chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send_json(
        self, status: int, payload: dict[str, Any], *, headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _not_found(self) -> None:
        message = f"fake LLM: unknown URL {self.command} {self.path}"
        self._send_json(404, Rejection(404, message, code="unknown_url").body())
