"""Discord's gateway WebSocket, read so that a message counts as handled only after the inbox
took it: the sequence number sent in heartbeats and RESUMEs, and kept in the state file, is
that of the last dispatch handled, so after a crash a RESUME gets the rest again.

Not discord.py's `Client`: it advances its sequence when a dispatch arrives, before handlers
ran, and keeps no session across processes, so a crash would lose the message."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp

log = logging.getLogger(__name__)
# GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT (privileged: enabled in the portal).
INTENTS = (1 << 9) | (1 << 12) | (1 << 15)
Dispatch = Callable[[str, dict[str, Any]], Awaitable[None]]


class GatewayLost(Exception):
    """The gateway closed, stopped answering heartbeats, or asked to reconnect."""


@dataclass
class Resume:
    session_id: str = ""
    url: str = ""
    seq: int = 0  # the last dispatch handled


class ResumeFile:
    """The session to resume, kept on disk (written atomically) so a restart can resume it."""

    def __init__(self, path: str):
        self.path = Path(path).expanduser() if path else None  # empty: nothing kept

    def load(self) -> Resume:
        if self.path is None:
            return Resume()
        try:
            return Resume(**json.loads(self.path.read_text()))
        except (OSError, ValueError, TypeError):
            return Resume()

    def save(self, state: Resume) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(state)))
        os.replace(temporary, self.path)


class Gateway:
    def __init__(self, token: str, store: ResumeFile, timeout: float):
        self.token = token
        self.store = store
        self.timeout = timeout
        self.state = store.load()

    async def run(self, session: aiohttp.ClientSession, url: str, dispatch: Dispatch) -> None:
        """Reads dispatches until the connection is lost (raises GatewayLost)."""
        address = self.state.url if self.state.session_id else url
        async with session.ws_connect(
            f"{address}?v=10&encoding=json", timeout=aiohttp.ClientWSTimeout(ws_receive=None)
        ) as ws:
            hello = await asyncio.wait_for(ws.receive_json(), self.timeout)
            interval = hello["d"]["heartbeat_interval"] / 1000
            await ws.send_json(self._hello_reply())
            acked = asyncio.Event()
            acked.set()
            beating = asyncio.create_task(self._heartbeat(ws, interval, acked))
            try:
                await self._read(ws, dispatch, acked)
            finally:
                beating.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await beating

    def _hello_reply(self) -> dict[str, Any]:
        if self.state.session_id:
            resume = {"token": self.token, "session_id": self.state.session_id}
            return {"op": 6, "d": {**resume, "seq": self.state.seq}}
        properties = {"os": "linux", "browser": "crayfish", "device": "crayfish"}
        identify = {"token": self.token, "intents": INTENTS, "properties": properties}
        return {"op": 2, "d": identify}

    async def _heartbeat(self, ws: Any, interval: float, acked: asyncio.Event) -> None:
        """Beats every interval; a beat not acknowledged by the next one drops the socket."""
        while True:
            await asyncio.sleep(interval)
            if not acked.is_set():
                log.warning("discord: gateway stopped answering heartbeats; reconnecting")
                await ws.close(code=4000)
                return
            acked.clear()
            await ws.send_json({"op": 1, "d": self.state.seq or None})

    async def _read(self, ws: Any, dispatch: Dispatch, acked: asyncio.Event) -> None:
        async for frame in ws:
            if frame.type != aiohttp.WSMsgType.TEXT:
                break
            payload = json.loads(frame.data)
            op = payload.get("op")
            if op == 11:
                acked.set()
            elif op == 1:
                await ws.send_json({"op": 1, "d": self.state.seq or None})
            elif op == 7:
                raise GatewayLost("Discord asked to reconnect")
            elif op == 9:
                if not payload.get("d"):  # not resumable: identify anew next time
                    self._remember(Resume())
                raise GatewayLost("Discord invalidated the session")
            elif op == 0:
                await self._dispatched(payload, dispatch)
        raise GatewayLost(f"the gateway closed ({ws.close_code})")

    async def _dispatched(self, payload: dict[str, Any], dispatch: Dispatch) -> None:
        event, data = payload.get("t") or "", payload.get("d") or {}
        if event == "READY":
            url = data.get("resume_gateway_url", "")
            self.state = Resume(data["session_id"], url, 0)
        await dispatch(event, data)  # raises: not handled, the seq stays before it
        self._remember(Resume(self.state.session_id, self.state.url, payload.get("s") or 0))

    def _remember(self, state: Resume) -> None:
        self.state = state
        try:
            self.store.save(state)
        except OSError as exc:  # resuming after a crash is lost, receiving is not
            log.warning("discord: session not saved to %s: %s", self.store.path, exc)
