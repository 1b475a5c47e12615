"""The web page in headless Chromium: a chat's session shows on each turn where its answer went,
a reply the channel gave up on plainly, with the platform's error."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from devstack.launcher import LocalStack
from tests.e2e.conftest import TOKEN
from tests.fakes import FakeLLM

pytestmark = pytest.mark.slow  # starts the whole stack
BLOCKED = "Forbidden: bot was blocked by the user"


def chat_turn(api: httpx.Client, number: int, text: str) -> str:
    body = {"chat_id": "901", "message_id": str(number), "session_id": "telegram.901"}
    accepted = api.post("/api/channels/telegram/turns", json={**body, "text": text})
    assert accepted.status_code == 202, accepted.text
    task_id: str = accepted.json()["task_id"]
    deadline = time.monotonic() + 60
    while api.get(f"/api/tasks/{task_id}").json()["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, f"task {task_id} did not finish"
        time.sleep(0.1)
    return task_id


def test_a_chat_turn_whose_reply_failed_shows_the_error(
    page: Any, stack: LocalStack, fake_llm: FakeLLM
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    fake_llm.reply_text("Here is your answer.")
    fake_llm.reply_text("A second answer.")
    with httpx.Client(base_url=stack.url, headers=headers, timeout=30) as api:
        delivered = chat_turn(api, 1, "first question")
        failed = chat_turn(api, 2, "second question")
        for task_id, status in ((delivered, "delivered"), (failed, "failed")):
            body = {"status": status, "error": BLOCKED if status == "failed" else ""}
            settled = api.post(f"/api/channels/telegram/replies/{task_id}", json=body)
            assert settled.status_code == 204, settled.text
    page.goto(stack.url + "/#session=telegram.901")
    turns = page.locator(".msg.assistant")
    expect(turns).to_have_count(2, timeout=30_000)
    expect(turns.nth(0)).to_contain_text("Here is your answer.")
    expect(turns.nth(0).locator(".delivery-done")).to_contain_text("delivered to telegram")
    expect(turns.nth(1).locator(".delivery-failed")).to_contain_text(BLOCKED)
    expect(page.locator(".delivery-failed")).to_have_count(1)
