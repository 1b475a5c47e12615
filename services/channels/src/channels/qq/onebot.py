"""One forward WebSocket to a OneBot v11 implementation (NapCat): actions sent as
`{"action", "params", "echo"}` and their answers matched back by `echo`; events queued for the
receive loop. A reader task owns the socket's incoming side, so a call that never gets its
answer holds up only its caller (who gives up after the call timeout)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus, WebSocketException

from channels.contract import PlatformRefused, RetryLater

log = logging.getLogger(__name__)
RETRY = 2.0  # seconds before a failed or unanswered call is tried again
# OneBot v11 retcodes of a refusal for good (bad parameters, token, unknown action or target);
# any other failure (NapCat's 200, QQ's risk control) may pass when tried again.
REFUSALS = range(1400, 1500)


class ConnectionLost(Exception):
    """The WebSocket closed; the hub reconnects."""


class OneBotConnection:
    def __init__(self, url: str, access_token: str, timeout: float):
        self.url, self.access_token, self.timeout = url, access_token, timeout
        self.events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._socket: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._echoes = itertools.count(1)
        self.lost: Exception | None = None

    async def open(self) -> None:
        await self.close()
        self.events = asyncio.Queue()
        self.lost = None
        headers = {"Authorization": f"Bearer {self.access_token}"} if self.access_token else {}
        try:
            self._socket = await connect(
                self.url,
                additional_headers=headers,
                open_timeout=self.timeout,
                ping_interval=20,
                ping_timeout=self.timeout,  # a socket that stops answering is dropped
                max_size=16 * 2**20,
            )
        except InvalidStatus as exc:
            if exc.response.status_code in (401, 403):
                raise PlatformRefused(f"OneBot refused the access token: {exc}") from exc
            raise ConnectionLost(f"OneBot: {exc}") from exc
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise ConnectionLost(f"OneBot unreachable at {self.url}: {exc}") from exc
        self._reader = asyncio.create_task(self._read(self._socket), name="onebot-reader")

    async def call(self, action: str, **params: Any) -> Any:
        """The action's `data`; RetryLater when it fails for now or is not answered in time,
        PlatformRefused when OneBot refuses it for good."""
        if self._socket is None or self.lost is not None:
            raise RetryLater(f"OneBot not connected ({self.lost})", RETRY)
        echo = str(next(self._echoes))
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[echo] = answer
        frame = json.dumps({"action": action, "params": params, "echo": echo})
        try:
            async with asyncio.timeout(self.timeout):
                await self._socket.send(frame)
                reply = await answer
        except TimeoutError as exc:
            raise RetryLater(f"OneBot did not answer {action} in time", RETRY) from exc
        except (ConnectionLost, WebSocketException) as exc:
            raise RetryLater(f"OneBot connection lost during {action}: {exc}", RETRY) from exc
        finally:
            self._pending.pop(echo, None)
        return _data(action, reply)

    async def _read(self, socket: ClientConnection) -> None:
        try:
            async for frame in socket:
                self._dispatch(json.loads(frame))
            self._lose(ConnectionLost(f"OneBot closed the connection ({socket.close_code})"))
        except (WebSocketException, OSError, ValueError) as exc:
            self._lose(ConnectionLost(f"OneBot connection lost: {exc}"))

    def _dispatch(self, frame: dict[str, Any]) -> None:
        if "post_type" in frame:
            self.events.put_nowait(frame)
            return
        waiting = self._pending.get(str(frame.get("echo", "")))
        if waiting is not None and not waiting.done():
            waiting.set_result(frame)
        elif frame.get("retcode") == 1403:  # NapCat's answer to a wrong token, then it closes
            self._lose(PlatformRefused(f"OneBot refused the access token: {frame.get('message')}"))

    def _lose(self, error: Exception) -> None:
        if self.lost is None:
            self.lost = error
        for waiting in self._pending.values():
            if not waiting.done():
                waiting.set_exception(ConnectionLost(str(error)))
        self.events.put_nowait(None)  # wakes the receive loop, which raises self.lost

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None
        if self._socket is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(self.timeout):
                    await self._socket.close()
            self._socket = None


def _data(action: str, reply: dict[str, Any]) -> Any:
    if reply.get("status") in ("ok", "async") and reply.get("retcode", 0) == 0:
        return reply.get("data")
    code = int(reply.get("retcode") or -1)
    why = reply.get("wording") or reply.get("message") or reply.get("msg") or "failed"
    if code in REFUSALS:
        raise PlatformRefused(f"OneBot refused {action}: {code} {why}")
    raise RetryLater(f"OneBot could not {action}: {code} {why}", RETRY)
