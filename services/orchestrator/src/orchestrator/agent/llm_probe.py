"""Whether the LLM provider is configured and answers: one cheap `GET {base_url}/models` with a
short timeout, remembered for a while, for the start-up line and /readyz's `llm` entry.

It never makes the stack unready: the provider is an outside party that may come back, and a
missing key would otherwise hold `make run`'s and compose's health checks forever, with the
web page and the API (which need no LLM to list sessions or files) unreachable meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp

from orchestrator.agent.chat_http import env_proxy

log = logging.getLogger(__name__)

OPENAI_URL = "https://api.openai.com/v1"
PROBE_TIMEOUT = 3.0  # seconds: a provider slower than this to list models counts as unreachable
REMEMBERED = 30.0  # seconds a probe's answer is reused (readyz is polled by health checks)


@dataclass(frozen=True)
class LlmState:
    """`configured`: a key is set, or the URL is not OpenAI's (local servers need none).
    `reachable`: the server answered at all; `ok`: it answered 2xx."""

    model: str
    base_url: str
    configured: bool
    reachable: bool
    ok: bool
    detail: str
    checked: bool = True

    @property
    def trouble(self) -> bool:
        """Worth a warning: no key for OpenAI, or a probe that failed."""
        return not self.configured or (self.checked and not self.ok)

    def view(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """What start-up logs, one line."""
        where = f"LLM {self.model} at {self.base_url}"
        if not self.configured:
            return f"{where}: not configured (OPENAI_API_KEY is unset); turns will fail until it is"
        if not self.ok:
            return f"{where}: {self.detail}; turns will fail until it answers"
        return f"{where}: answers"


class LlmProbe:
    def __init__(self, base_url: str, api_key: Callable[[], str], model: str):
        self.base_url = base_url.rstrip("/")
        self.current_key = api_key  # the keys file may change it while the process runs
        self.model = model
        self._last: tuple[float, LlmState] | None = None
        self._probing: asyncio.Task[LlmState] | None = None

    @property
    def api_key(self) -> str:
        return self.current_key()

    @property
    def configured(self) -> bool:
        return bool(self.api_key) or self.base_url != OPENAI_URL

    async def state(self) -> LlmState:
        """A fresh answer (probed now unless one is recent or under way)."""
        if self._last is not None and time.monotonic() - self._last[0] <= REMEMBERED:
            return self._last[1]
        return await asyncio.shield(self._refresh())

    def known(self) -> LlmState:
        """The last answer without waiting (a stale one starts a probe in the background):
        /readyz answers at once, however slow the provider is."""
        if self._last is None or time.monotonic() - self._last[0] > REMEMBERED:
            self._refresh()
        if self._last is None:
            return LlmState(self.model, self.base_url, self.configured, False, False, "", False)
        return self._last[1]

    async def log_at_start(self) -> None:
        state = await self.state()
        (log.warning if state.trouble else log.info)("%s", state.line())

    def close(self) -> None:
        if self._probing is not None:
            self._probing.cancel()

    def _refresh(self) -> asyncio.Task[LlmState]:
        if self._probing is None or self._probing.done():
            self._probing = asyncio.create_task(self._probe_and_keep(), name="llm-probe")
        return self._probing

    async def _probe_and_keep(self) -> LlmState:
        state = await self._probe()
        self._last = (time.monotonic(), state)
        return state

    async def _probe(self) -> LlmState:
        if not self.configured:  # OpenAI without a key: nothing to ask
            return self._state(False, False, "OPENAI_API_KEY is unset")
        url = f"{self.base_url}/models"
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(url, headers=headers, proxy=env_proxy(url)) as reply,
            ):
                status = reply.status
        except TimeoutError:
            return self._state(False, False, f"no answer from {url} in {PROBE_TIMEOUT:.0f} s")
        except aiohttp.ClientError as exc:
            return self._state(False, False, f"not reachable ({type(exc).__name__}: {exc})")
        if status < 300:
            return self._state(True, True, f"HTTP {status}")
        refused = " (the key was refused)" if status in (401, 403) else ""
        return self._state(True, False, f"GET /models answered HTTP {status}{refused}")

    def _state(self, reachable: bool, ok: bool, detail: str) -> LlmState:
        return LlmState(self.model, self.base_url, self.configured, reachable, ok, detail)
