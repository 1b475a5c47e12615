"""The service's one Chromium and its contexts, one per session: started on first use, closed
after idle, capped in number and in memory."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time

from crayfish_common.tools import ToolError
from playwright.async_api import Browser, Playwright, async_playwright

from browser.chromium import BASE_ARGS, LAUNCH_PROXY, chromium_memory
from browser.config import BrowserSettings
from browser.downloads import Downloads
from browser.session_browser import PageLimits, SessionBrowser

log = logging.getLogger(__name__)

MiB = 1024 * 1024


class BrowserPool:
    """Sessions' browser contexts over one lazily launched Chromium."""

    def __init__(self, settings: BrowserSettings):
        self.settings = settings
        self.downloads = Downloads(
            settings.workspace, settings.allow, settings.max_download_bytes, settings.timeout
        )
        self.limits = PageLimits(settings.max_pages, settings.timeout)
        self.sessions: dict[str, SessionBrowser] = {}
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._launching = asyncio.Lock()
        self._creating = asyncio.Lock()
        self._memory_checked = 0.0
        self._reaper: asyncio.Task[None] | None = None

    async def session(self, session_id: str, create: bool = True) -> SessionBrowser | None:
        """The session's context (made on first use); ToolError past the cap."""
        found = self.sessions.get(session_id)
        if found is not None or not create:
            return found
        async with self._creating:  # two first calls of one session make one context
            return self.sessions.get(session_id) or await self._start(session_id)

    async def _start(self, session_id: str) -> SessionBrowser:
        await self.close_idle()
        if len(self.sessions) >= self.settings.max_contexts:
            raise ToolError(
                f"{len(self.sessions)} browser sessions are open, the most this service allows;"
                " try again later (idle ones close after"
                f" {self.settings.idle_seconds:g} s) or call browser_close in another session"
            )
        browser = await self._chromium()
        started = await SessionBrowser.start(
            browser, session_id, self.settings.allow, self.downloads, self.limits
        )
        self.sessions[session_id] = started
        return started

    async def close_session(self, session_id: str) -> bool:
        found = self.sessions.pop(session_id, None)
        if found is None:
            return False
        await found.close()
        return True

    async def close_idle(self) -> None:
        cutoff = time.monotonic() - self.settings.idle_seconds
        for session_id, found in list(self.sessions.items()):
            if found.last_used < cutoff and not found.lock.locked():
                log.info("closing the idle browser context of session %s", session_id)
                await self.close_session(session_id)

    async def memory(self) -> int:
        """Bytes all Chromium processes of this service use now."""
        return await asyncio.to_thread(chromium_memory, os.getpid())

    async def enforce_memory(self, keep: str, every: float = 0.0) -> list[str]:
        """Closes least recently used contexts (`keep` last) while over the cap; their ids.
        With `every`, does nothing if it looked less than that many seconds ago (reading
        /proc costs tens of milliseconds, more than a snapshot)."""
        if every:
            if time.monotonic() - self._memory_checked < every:
                return []
            self._memory_checked = time.monotonic()
        closed: list[str] = []
        cap = self.settings.max_memory_mb * MiB
        while await self.memory() > cap and self.sessions:
            order = sorted(
                self.sessions.values(), key=lambda s: (s.session_id == keep, s.last_used)
            )
            victim = order[0].session_id
            log.warning("browser memory over %d MiB: closing session %s", cap // MiB, victim)
            await self.close_session(victim)
            closed.append(victim)
        return closed

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        for session_id in list(self.sessions):
            await self.close_session(session_id)
        if self._browser is not None:
            with contextlib.suppress(Exception):
                await self._browser.close()
        if self._playwright is not None:
            await self._playwright.stop()

    async def _chromium(self) -> Browser:
        async with self._launching:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            if not await asyncio.to_thread(os.path.isfile, self.settings.chromium):
                raise ToolError(f"the browser is not installed here ({self.settings.chromium})")
            try:
                self._browser = await self._launch()
            except Exception as exc:  # Playwright's driver or Chromium did not start
                log.exception("the browser did not start")
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
                raise ToolError(f"the browser could not start ({first}); see its log") from exc
            self._browser.on("disconnected", lambda _: self.sessions.clear())
            if self._reaper is None:
                self._reaper = asyncio.create_task(self._reap())
            log.info("chromium started (%s)", self._browser.version)
            return self._browser

    async def _launch(self) -> Browser:
        if self._playwright is None:
            self._playwright = await async_playwright().start()
        return await self._playwright.chromium.launch(
            executable_path=self.settings.chromium,
            chromium_sandbox=self.settings.chromium_sandbox,
            args=list(BASE_ARGS),
            proxy=LAUNCH_PROXY,  # type: ignore[arg-type]
            headless=True,
        )

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(min(30.0, self.settings.idle_seconds / 2))
            with contextlib.suppress(Exception):
                await self.close_idle()
