"""E2E fixtures: the whole stack with the fake LLM, and headless Debian Chromium via Playwright."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM
from tests.stacks import running_stack

TOKEN = "e2e-token-7f3a"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    # Test traffic stays on loopback: every other host name fails to resolve.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]

MEMORY_MD = """# Memory

## Decisions
- 2026-03-02: we chose PostgreSQL over MySQL for the billing service because of JSONB.
- The team's weekly sync moved to Thursdays at 10:00.
"""


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture(scope="module")
def stack(fake_llm: FakeLLM) -> Iterator[LocalStack]:
    presets = [  # two presets on the one fake provider, told apart by their model names
        {"name": "main", "base_url": fake_llm.base_url, "model": "main-model"},
        {"name": "small", "base_url": fake_llm.base_url, "model": "small-model"},
    ]
    env = {
        "CRAYFISH_AUTO_RECALL": "false",
        "CRAYFISH_API_TOKEN": TOKEN,
        "CRAYFISH_LLM_VISION": "on",
        "CRAYFISH_MODELS": json.dumps(presets),
    }
    with running_stack(fake_llm.base_url, {"MEMORY.md": MEMORY_MD}, env) as stack:
        yield stack


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium (Playwright keeps each context in a fresh profile); never a download."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def page_in_context(browser: Any, **options: Any) -> Iterator[Any]:
    """A page in a new context with nothing in localStorage, failing the test on a JS error."""
    context = browser.new_context(**options)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def with_token(page: Any) -> Any:
    """The page of a user who typed the API token in before (it is in localStorage)."""
    page.add_init_script(  # about:blank has no localStorage, hence the try
        f"try {{ localStorage.setItem('crayfish.token', {TOKEN!r}); }} catch (e) {{}}"
    )
    return page


@pytest.fixture
def fresh_page(browser: Any) -> Iterator[Any]:
    with page_in_context(browser, viewport={"width": 1280, "height": 800}) as page:
        yield page


@pytest.fixture
def page(fresh_page: Any) -> Any:
    return with_token(fresh_page)


@pytest.fixture
def fresh_phone_page(browser: Any) -> Iterator[Any]:
    """A phone-sized touch screen (390 x 844 CSS pixels, as an iPhone 12-15)."""
    phone = {"width": 390, "height": 844}
    options = {"viewport": phone, "is_mobile": True, "has_touch": True, "device_scale_factor": 3}
    with page_in_context(browser, **options) as page:
        yield page


@pytest.fixture
def phone_page(fresh_phone_page: Any) -> Any:
    return with_token(fresh_phone_page)
