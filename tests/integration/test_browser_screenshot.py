"""browser_screenshot through the whole stack: the browser service writes the PNG to the shared
workspace's inbox/, and the orchestrator shows it to a model with vision after the tool result."""

from __future__ import annotations

import base64
import contextlib
import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from crayfish_common.healthcheck import check

from devstack.launcher import LocalStack, free_port
from tests.fakes import FakeLLM, Reply
from tests.integration.test_browser_turn import Page, chat, tool_outputs

BROWSER_ADDRESS = f"127.0.0.1:{free_port()}"
PAGE_PORT = free_port()
STACK_ENV = {"CRAYFISH_TOOL_SERVICES": f"browser={BROWSER_ADDRESS}", "CRAYFISH_LLM_VISION": "on"}

pytestmark = pytest.mark.skipif(
    not os.path.isfile("/usr/bin/chromium"), reason="Debian's chromium is not installed"
)


@pytest.fixture(scope="module")
def browser(stack: LocalStack) -> Iterator[None]:
    """A page on loopback (allow-listed) and the browser service on the stack's workspace."""
    pages = http.server.ThreadingHTTPServer(("127.0.0.1", PAGE_PORT), Page)
    threading.Thread(target=pages.serve_forever, daemon=True).start()
    env = {
        **os.environ,
        "BROWSER_PORT": BROWSER_ADDRESS.rsplit(":", 1)[1],
        "BROWSER_WORKSPACE": str(stack.workspace),
        "BROWSER_WEB_FETCH_ALLOW": f"127.0.0.1:{PAGE_PORT}",
    }
    process = subprocess.Popen([sys.executable, "-m", "browser"], env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while not check(BROWSER_ADDRESS, timeout=0.5):
        assert process.poll() is None, "the browser service exited at start-up"
        assert time.monotonic() < deadline, "the browser service did not become healthy"
        time.sleep(0.1)
    yield
    os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    pages.shutdown()


def wait_for_screenshot_tool(api: httpx.Client) -> None:
    """The browser started after the orchestrator: its tools are listed within the cache time."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        tools = api.get("/api/tools").json()["tools"]
        if any(tool["name"] == "browser_screenshot" for tool in tools):
            return
        time.sleep(0.2)
    raise AssertionError("browser_screenshot was not offered")


def image_parts(request: dict[str, Any]) -> list[str]:
    return [
        part["image_url"]["url"]
        for message in request["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


def test_a_screenshot_reaches_a_vision_model(
    browser: None, api: httpx.Client, stack: LocalStack, fake_llm: FakeLLM
):
    wait_for_screenshot_tool(api)
    seen = len(fake_llm.requests)
    fake_llm.reply_tool_calls(("browser_open", {"url": f"http://127.0.0.1:{PAGE_PORT}/hours"}))
    fake_llm.reply_tool_calls(("browser_screenshot", {}))
    fake_llm.reply_with(Reply(text="A page titled Opening hours."))
    task = chat(api, "what does the page look like?", "looking")
    assert task["status"] == "completed", task
    third = fake_llm.requests[seen + 2]
    result = tool_outputs(third)[-1]
    assert "is shown in the next message]" in result, result
    (url,) = image_parts(third)
    png = base64.b64decode(url.removeprefix("data:image/png;base64,"))
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000  # a rendered page
    saved = sorted((stack.workspace / "inbox").glob("*.png"))
    assert [p.read_bytes() for p in saved] == [png]
