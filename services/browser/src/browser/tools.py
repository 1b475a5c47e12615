"""The browser tools: the tool contract's side (schemas, arguments, what the model reads)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, ClassVar

from crayfish_common.safe_files import FileRefused
from crayfish_common.tools import CallContext, Tool, ToolError, ToolResult, ToolSet, object_schema

from browser.downloads import INBOX, safe_name
from browser.page_text import notices_block, untrusted_block
from browser.pool import BrowserPool
from browser.session_browser import SessionBrowser

REF = {"type": "string", "description": "An element ref from browser_snapshot, e.g. e5."}
MAX_SCREENSHOT_BYTES = 10 * 1024 * 1024
# Memory is read at most this often: a page grows over seconds, not between two quick calls.
MEMORY_CHECK_SECONDS = 2.0


class BrowserTool(Tool):
    """Runs one step in the calling session's context, then reports the page and notices."""

    shows_page: ClassVar[bool] = True  # the answer carries the page snapshot
    acts: ClassVar[bool] = True  # may start a download the answer should report

    def __init__(self, pool: BrowserPool):
        self.pool = pool

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        if not call.session_id:
            raise ToolError("the browser needs a session (none was given)")
        session = await self.pool.session(call.session_id)
        assert session is not None
        async with session.lock:
            session.last_used = time.monotonic()
            try:
                data = await self.step(session, args)
                if self.acts:
                    await session.settle()
                parts, truncated = await self.report(session)
            except ToolError as exc:  # the guard's reasons belong with the failure
                said = notices_block(session.take_notices())
                raise ToolError(f"{exc}\n\n{said}" if said else str(exc)) from exc
            finally:
                session.last_used = time.monotonic()
        closed = await self.pool.enforce_memory(keep=call.session_id, every=MEMORY_CHECK_SECONDS)
        notices = session.take_notices()
        if call.session_id in closed:
            notices.append("this session's browser was closed: the browser's memory cap was hit")
        parts.append(notices_block(notices))
        output = "\n\n".join(part for part in parts if part)
        return ToolResult(True, output, {**data, "notices": notices}, truncated=truncated)

    async def step(self, session: SessionBrowser, args: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def report(self, session: SessionBrowser) -> tuple[list[str], bool]:
        if not self.shows_page:
            return [], False
        url, title, tree = await session.snapshot()
        text, truncated = untrusted_block(url, title, tree, self.pool.settings.max_snapshot_chars)
        return [text], truncated


class BrowserOpen(BrowserTool):
    name = "browser_open"
    description = (
        "Open a public http(s) URL in this session's browser (pages run JavaScript) and return"
        " the page as text with element refs (untrusted content)."
    )
    parameters = object_schema({"url": {"type": "string"}}, required=["url"])

    async def step(self, session: SessionBrowser, args: dict[str, Any]) -> dict[str, Any]:
        await session.open(args["url"].strip())
        return {}


class BrowserSnapshot(BrowserTool):
    name = "browser_snapshot"
    description = "The current browser page as text with element refs (bounded; untrusted)."
    parameters = object_schema({})
    acts = False

    async def step(self, session: SessionBrowser, args: dict[str, Any]) -> dict[str, Any]:
        return {}


class BrowserClick(BrowserTool):
    name = "browser_click"
    description = "Click an element of the current browser page by its ref from the snapshot."
    parameters = object_schema({"ref": REF}, required=["ref"])

    async def step(self, session: SessionBrowser, args: dict[str, Any]) -> dict[str, Any]:
        await session.click(args["ref"])
        return {}


class BrowserType(BrowserTool):
    name = "browser_type"
    description = (
        "Type text into a field of the current browser page (by ref), replacing what it held;"
        " submit=true presses Enter afterwards."
    )
    parameters = object_schema(
        {"ref": REF, "text": {"type": "string"}, "submit": {"type": "boolean"}},
        required=["ref", "text"],
    )

    async def step(self, session: SessionBrowser, args: dict[str, Any]) -> dict[str, Any]:
        await session.type(args["ref"], args["text"], bool(args.get("submit")))
        return {}


class BrowserBack(BrowserTool):
    name = "browser_back"
    description = "Go back one page in this session's browser."
    parameters = object_schema({})

    async def step(self, session: SessionBrowser, args: dict[str, Any]) -> dict[str, Any]:
        await session.back()
        return {}


class BrowserScreenshot(BrowserTool):
    name = "browser_screenshot"
    description = "A PNG screenshot of the current browser page, saved in the workspace's inbox/."
    parameters = object_schema({})
    shows_page = False
    acts = False

    async def step(self, session: SessionBrowser, args: dict[str, Any]) -> dict[str, Any]:
        image = await session.screenshot()
        path = f"{INBOX}/{safe_name('screenshot.png')}"
        root = self.pool.downloads.root
        try:
            await asyncio.to_thread(root.write_atomic, path, image, MAX_SCREENSHOT_BYTES)
        except (FileRefused, OSError) as exc:
            raise ToolError(f"screenshot not saved: {exc}") from exc
        session.notices.append(f"screenshot of {session.page.url[:200]} saved to {path}")
        return {"image": {"path": path, "mime": "image/png", "bytes": len(image)}}


class BrowserClose(BrowserTool):
    name = "browser_close"
    description = "Close this session's browser (its pages, cookies and storage are dropped)."
    parameters = object_schema({})

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        closed = await self.pool.close_session(call.session_id)
        return ToolResult(True, "browser closed" if closed else "no browser was open")


def browser_tools(pool: BrowserPool) -> ToolSet:
    tools = [
        cls(pool)
        for cls in (
            BrowserOpen,
            BrowserSnapshot,
            BrowserClick,
            BrowserType,
            BrowserBack,
            BrowserScreenshot,
            BrowserClose,
        )
    ]
    return ToolSet(tools)
