"""The web page's memory history in headless Chromium: revisions listed, a diff, a restore."""

from __future__ import annotations

import os
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from devstack.launcher import LocalStack
from tests.e2e.conftest import TOKEN

pytestmark = pytest.mark.slow  # starts the whole stack

SCREENSHOT = os.environ.get("CRAYFISH_E2E_SCREENSHOT")  # a path, to look at the page by hand


def test_a_revision_shows_its_diff_and_restores_the_files(page: Any, stack: LocalStack):
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=stack.url, headers=headers, timeout=60) as api:
        note = {"text": "- Wrong: the sync is on Mondays.", "path": "MEMORY.md", "reason": "typo"}
        assert api.post("/api/memory/notes", json=note).status_code == 201
    assert "Mondays" in (stack.workspace / "MEMORY.md").read_text()

    page.goto(stack.url)
    page.locator("#memory-history summary").click()
    newest = page.locator("#history-body .revision-link").first
    expect(newest).to_contain_text("api", timeout=15_000)
    expect(page.locator("#history-body .revision-files").first).to_have_text("MEMORY.md")
    expect(page.locator("#history-body .revision-why").first).to_have_text("typo")
    newest.click()
    added = page.locator("#viewer .diff-line.added")
    expect(added).to_have_text(["+", "+- Wrong: the sync is on Mondays."], timeout=15_000)
    expect(page.locator("#viewer .revision-reason")).to_contain_text("typo")
    if SCREENSHOT:
        page.screenshot(path=SCREENSHOT, full_page=True)

    # Restore the revision before it (the files as the stack started): the note goes away.
    page.locator("#history-body .revision-link").nth(1).click()
    page.locator("#viewer button.restore").click()
    expect(page.locator("#viewer .restored")).to_contain_text("Restored", timeout=15_000)
    assert "Mondays" not in (stack.workspace / "MEMORY.md").read_text()
    expect(page.locator("#history-body .revision-link")).to_have_count(3)
