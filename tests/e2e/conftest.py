"""E2E fixtures: the whole stack with the fake LLM, and headless Debian Chromium via Playwright."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crayfish_common.launcher import LocalStack, free_port

from tests.fakes import FakeLLM

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
    root = Path(tempfile.mkdtemp(prefix="crayfish-e2e-"))
    root.chmod(0o755)  # the sandbox uid must traverse it
    workspace = root / "workspace"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text(MEMORY_MD)
    stack = LocalStack(
        workspace=workspace,
        data_dir=root / "data",
        http_port=free_port(),
        log_dir=root / "logs",
        extra_env={
            "OPENAI_BASE_URL": fake_llm.base_url,
            "OPENAI_API_KEY": "sk-e2e",
            "CRAYFISH_MODEL": "fake-model",
            "CRAYFISH_LLM_RETRY_BASE_DELAY": "0.01",
            "CRAYFISH_AUTO_RECALL": "false",
        },
    )
    stack.start()
    try:
        stack.wait_healthy(timeout=180)
        yield stack
    finally:
        stack.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A fresh Chromium profile; never a downloaded browser build."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 800},
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser_context: Any) -> Iterator[Any]:
    page = browser_context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    page.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
