"""One session's browser context: its guard proxy, its pages, and what happened since last asked.

Each context gets its own proxy listener, so a request the guard refuses is reported to the
session whose page made it. Downloads are refused by Chromium and fetched again by `Downloads`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from dataclasses import dataclass

from crayfish_common.tools import ToolError
from crayfish_common.url_guard import AllowList, UrlRefused, parse_target
from playwright.async_api import Browser, BrowserContext, Download, Page
from playwright.async_api import Error as PlaywrightError

from browser.downloads import Downloads
from browser.proxy import GuardProxy

log = logging.getLogger(__name__)

REF = re.compile(r"(f\d+)?e\d+")
# Where a page may be: the web, the empty page a new tab starts on, Chromium's error page.
PAGE_SCHEMES = ("http:", "https:", "about:blank", "chrome-error://chromewebdata/")


@dataclass(frozen=True)
class PageLimits:
    max_pages: int
    timeout: float  # seconds per navigation or action


class SessionBrowser:
    """A browser context for one session; methods raise ToolError with a reason for the model."""

    def __init__(self, session_id: str, proxy: GuardProxy, limits: PageLimits):
        self.session_id = session_id
        self.proxy = proxy
        self.limits = limits
        self.notices: list[str] = []
        self.pages: list[Page] = []
        self.context: BrowserContext | None = None
        self.last_used = time.monotonic()
        self.lock = asyncio.Lock()
        self._downloads: Downloads | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @classmethod
    async def start(
        cls,
        browser: Browser,
        session_id: str,
        allow: AllowList,
        downloads: Downloads,
        limits: PageLimits,
    ) -> SessionBrowser:
        notices: list[str] = []
        proxy = GuardProxy(allow, lambda what, why: notices.append(f"blocked {what}: {why}"))
        server = await proxy.start()
        self = cls(session_id, proxy, limits)
        self.notices = notices
        self._downloads = downloads
        self.context = await browser.new_context(
            proxy={"server": server, "bypass": "<-loopback>"},
            accept_downloads=False,
            service_workers="block",
            viewport={"width": 1280, "height": 900},
        )
        self.context.set_default_timeout(limits.timeout * 1000)
        self.context.on("page", self._on_page)
        return self

    @property
    def page(self) -> Page:
        """The page tools act on: the newest that is still open (a fresh one if none)."""
        open_pages = [p for p in self.pages if not p.is_closed()]
        self.pages = open_pages
        if not open_pages:
            raise ToolError("no page is open; call browser_open(url) first")
        return open_pages[-1]

    def take_notices(self) -> list[str]:
        taken, self.notices[:] = list(self.notices), []
        return taken

    async def open(self, url: str) -> None:
        try:
            parse_target(url)
        except UrlRefused as exc:
            raise ToolError(f"browser_open {url[:200]}: {exc}") from exc
        for stale in [p for p in self.pages if p.url.startswith("chrome-error:")]:
            await stale.close()  # an error page would interrupt the next navigation
        if not [p for p in self.pages if not p.is_closed()]:
            assert self.context is not None
            page = await self.context.new_page()
            if page not in self.pages:  # the "page" event may come first
                self.pages.append(page)
        await self._navigation(self.page.goto(url, wait_until="load"), url)

    async def click(self, ref: str) -> None:
        await self._action(self._element(ref).click(), f"click {ref}")

    async def type(self, ref: str, text: str, submit: bool) -> None:
        element = self._element(ref)
        await self._action(element.fill(text), f"type into {ref}")
        if submit:
            await self._action(element.press("Enter"), f"submit {ref}")

    async def back(self) -> None:
        await self._navigation(self.page.go_back(wait_until="load"), "the previous page")

    async def screenshot(self) -> bytes:
        try:
            return await self.page.screenshot(type="png", timeout=self.limits.timeout * 1000)
        except PlaywrightError as exc:
            raise ToolError(f"screenshot failed: {_first_line(exc)}") from exc

    async def snapshot(self) -> tuple[str, str, str]:
        """(url, title, the accessibility tree with refs) of the current page."""
        page = self.page
        try:
            tree = await page.aria_snapshot(mode="ai", timeout=self.limits.timeout * 1000)
            title = await page.title()
        except PlaywrightError as exc:
            raise ToolError(f"cannot read the page: {_first_line(exc)}") from exc
        return page.url, title, tree

    async def settle(self) -> None:
        """Waits (within the action timeout) for downloads the last action started."""
        await asyncio.sleep(0.05)  # a download event arrives just after the click returns
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=self.limits.timeout)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.context is not None:
            with contextlib.suppress(PlaywrightError):
                await self.context.close()
        await self.proxy.close()

    def _element(self, ref: str):  # type: ignore[no-untyped-def]
        ref = ref.strip().removeprefix("ref=")
        if not REF.fullmatch(ref):
            raise ToolError(f"{ref!r} is not an element ref (like e5) from browser_snapshot")
        return self.page.locator(f"aria-ref={ref}")

    async def _navigation(self, step, what: str) -> None:  # type: ignore[no-untyped-def]
        try:
            await step
        except PlaywrightError as exc:
            raise ToolError(f"cannot open {what[:200]}: {_first_line(exc)}") from exc
        finally:
            await self._leave_refused_schemes()

    async def _action(self, step, what: str) -> None:  # type: ignore[no-untyped-def]
        try:
            await step
        except PlaywrightError as exc:
            raise ToolError(f"cannot {what}: {_first_line(exc)}") from exc
        finally:
            await self._leave_refused_schemes()

    async def _leave_refused_schemes(self) -> None:
        """A page that reached file:, chrome:, data: (or any non-web scheme) is closed."""
        for page in [p for p in self.pages if not p.is_closed()]:
            if not page.url.startswith(PAGE_SCHEMES):
                self.notices.append(f"navigation to {page.url[:100]} refused: not http(s)")
                await page.close()

    def _on_page(self, page: Page) -> None:
        page.on("download", lambda download: self._spawn(self._download(download)))
        if page in self.pages:
            return
        open_pages = [p for p in self.pages if not p.is_closed()]
        if len(open_pages) >= self.limits.max_pages:
            self.notices.append(
                f"a new page ({page.url[:100]}) was closed: {self.limits.max_pages} pages"
                " per session at most"
            )
            self._spawn(page.close())
            return
        self.pages.append(page)

    async def _download(self, download: Download) -> None:
        assert self._downloads is not None
        self.notices.append(await self._downloads.save(download.url, download.suggested_filename))

    def _spawn(self, step) -> None:  # type: ignore[no-untyped-def]
        task = asyncio.ensure_future(step)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _first_line(exc: Exception) -> str:
    message = getattr(exc, "message", "") or str(exc)
    return message.strip().splitlines()[0][:300] if message.strip() else type(exc).__name__
