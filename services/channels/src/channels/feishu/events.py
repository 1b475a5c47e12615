"""Feishu's event long connection (lark-oapi's `ws.Client`) on a thread of its own.

The SDK's client runs its own asyncio loop (a module global) with `run_until_complete` and calls
handlers synchronously, so it cannot share the service's loop. Each `im.message.receive_v1`
event is handed to the service's loop and the SDK thread waits for it: only when the inbox
returned does the handler return, and only then does the SDK answer the event's frame with 200
(Feishu's acknowledgement). A handler that raises makes the SDK answer 500, so Feishu sends
the event again."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import lark_oapi as lark
from lark_oapi.api.im.v1 import P2ImMessageReceiveV1
from lark_oapi.ws import client as lark_ws_client

log = logging.getLogger(__name__)

Handle = Callable[[P2ImMessageReceiveV1], Coroutine[Any, Any, None]]


class LongConnection:
    def __init__(self, app_id: str, app_secret: str, domain: str, wait: float):
        self.app_id, self.app_secret, self.domain, self.wait = app_id, app_secret, domain, wait
        self._thread: threading.Thread | None = None
        self._handle: Handle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.ended: asyncio.Future[None] | None = None

    async def run(self, handle: Handle) -> None:
        """Receives until the SDK's client gives up (bad credentials): then raises. The SDK
        reconnects by itself; its thread lives on across calls (one per process)."""
        self._handle, self._loop = handle, asyncio.get_running_loop()
        if self._thread is None or not self._thread.is_alive():
            self.ended = self._loop.create_future()
            self._thread = threading.Thread(target=self._serve, name="feishu-ws", daemon=True)
            self._thread.start()
        assert self.ended is not None
        await asyncio.shield(self.ended)

    def _serve(self) -> None:
        # The SDK's client runs on its module's `loop`, taken when the module was imported:
        # in this service that is the main thread's loop, already running. A loop of this
        # thread's own, set before the client is made (its cache schedules a task on it).
        lark_ws_client.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(lark_ws_client.loop)
        dispatcher = (
            lark.EventDispatcherHandler.builder("", "")
            .register_p2_im_message_receive_v1(self._on_message)
            .build()
        )
        client = lark.ws.Client(
            self.app_id,
            self.app_secret,
            event_handler=dispatcher,
            domain=self.domain,
            log_level=lark.LogLevel.WARNING,
        )
        error: BaseException = RuntimeError("the Feishu long connection ended")
        try:
            client.start()
        except BaseException as exc:  # reported to the hub, which retries
            error = exc
        if self._loop is not None and self.ended is not None:
            self._loop.call_soon_threadsafe(_fail, self.ended, error)

    def _on_message(self, event: P2ImMessageReceiveV1) -> Any:
        assert self._loop is not None and self._handle is not None
        queued: concurrent.futures.Future[None] = asyncio.run_coroutine_threadsafe(
            self._handle(event), self._loop
        )
        queued.result(self.wait)  # raises: the SDK answers 500 and Feishu sends it again
        return None


def _fail(ended: asyncio.Future[None], error: BaseException) -> None:
    if not ended.done():
        ended.set_exception(RuntimeError(f"Feishu long connection: {error}"))
