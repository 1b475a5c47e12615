"""Contexts per session: a cap on their number, closed when idle, pop-ups and memory capped."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from browser.pool import BrowserPool
from browser.tools import MEMORY_CHECK_SECONDS, browser_tools
from crayfish_common.tools import CallContext, ToolSet

from .conftest import HAVE_CHROMIUM, Site, _serve, browser_settings

POPUPS = """<html><title>Pop-ups</title><body><p>Pop-ups</p><script>
for (let i = 0; i < 4; i++) window.open('/form?' + i);</script></body></html>"""


async def run(tools: ToolSet, name: str, session: str, **args: object):  # type: ignore[no-untyped-def]
    return await tools.run(name, json.dumps(args), CallContext(session_id=session))


@pytest.fixture
async def make_pool(site: Site, workspace: Path) -> AsyncIterator:  # type: ignore[type-arg]
    if not HAVE_CHROMIUM:
        pytest.skip("Debian's chromium is not installed (make system-deps-test)")
    pools: list[BrowserPool] = []

    def make(**fields: object) -> BrowserPool:
        pools.append(BrowserPool(browser_settings(site, workspace, **fields)))
        return pools[-1]

    yield make
    for pool in pools:
        await asyncio.wait_for(pool.close(), 30)


async def test_a_session_past_the_cap_is_refused_until_one_closes(make_pool, site: Site):
    tools = browser_tools(make_pool(max_contexts=2))
    for session in ("a", "b"):
        assert (await run(tools, "browser_open", session, url=f"{site.url}/form")).ok
    refused = await run(tools, "browser_open", "c", url=f"{site.url}/form")
    assert not refused.ok and "2 browser sessions are open" in refused.output
    await run(tools, "browser_close", "a")
    assert (await run(tools, "browser_open", "c", url=f"{site.url}/form")).ok


async def test_an_idle_context_is_closed_and_frees_its_place(make_pool, site: Site):
    pool = make_pool(max_contexts=1, idle_seconds=0.5)
    tools = browser_tools(pool)
    assert (await run(tools, "browser_open", "a", url=f"{site.url}/form")).ok
    assert not (await run(tools, "browser_open", "b", url=f"{site.url}/form")).ok
    await asyncio.sleep(0.6)
    assert (await run(tools, "browser_open", "b", url=f"{site.url}/form")).ok
    assert list(pool.sessions) == ["b"]


async def test_pop_ups_past_the_page_cap_are_closed_and_reported(make_pool, workspace: Path):
    async def popups(request: web.Request) -> web.Response:
        return web.Response(text=POPUPS, content_type="text/html")

    app = web.Application()
    app.router.add_get("/popups", popups)
    app.router.add_get("/form", popups)
    runner, url = await _serve(app)
    try:
        pool = make_pool(max_pages=2, web_fetch_allow=url.removeprefix("http://"))
        tools = browser_tools(pool)
        reply = await run(tools, "browser_open", "a", url=f"{url}/popups")
        await asyncio.sleep(0.5)
        snapshot = await run(tools, "browser_snapshot", "a")
        said = reply.data["notices"] + snapshot.data["notices"]
        assert any("2 pages per session at most" in n for n in said), said
        assert len([p for p in pool.sessions["a"].pages if not p.is_closed()]) <= 2
    finally:
        await runner.cleanup()


async def test_past_the_memory_cap_the_least_recently_used_context_closes_first(
    make_pool, site: Site
):
    pool = make_pool()
    tools = browser_tools(pool)
    for session in ("old", "new", "newest"):
        assert (await run(tools, "browser_open", session, url=f"{site.url}/form")).ok
    measured = await pool.memory()
    assert measured > 64 * 1024 * 1024  # Chromium with three pages: well past the cap below
    pool.settings.max_memory_mb = 64
    assert await pool.enforce_memory(keep="old") == ["new", "newest", "old"]
    await asyncio.sleep(MEMORY_CHECK_SECONDS)  # the tools look at memory at most this often
    reply = await run(tools, "browser_open", "again", url=f"{site.url}/form")
    assert "this session's browser was closed: the browser's memory cap was hit" in reply.output


async def test_a_browser_that_cannot_start_is_a_readable_tool_error(make_pool, site: Site):
    tools = browser_tools(make_pool(chromium="/bin/false"))
    reply = await run(tools, "browser_open", "a", url=f"{site.url}/form")
    assert not reply.ok
    assert reply.output.startswith("Error: the browser could not start (")
    missing = browser_tools(make_pool(chromium="/nonexistent/chromium"))
    reply = await run(missing, "browser_open", "a", url=f"{site.url}/form")
    assert reply.output == "Error: the browser is not installed here (/nonexistent/chromium)"
