"""The web page in headless Chromium: a command waiting for approval shows what it runs and
where, with buttons; a click answers it and the turn goes on."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from devstack.launcher import LocalStack
from tests.e2e.conftest import TOKEN
from tests.fakes import FakeLLM

pytestmark = pytest.mark.slow  # starts the whole stack


@pytest.fixture
def allowlist(stack: LocalStack) -> Iterator[httpx.Client]:
    """The stack under an allowlist policy (ls only) for the test; `full` again afterwards."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=stack.url, headers=headers, timeout=30) as api:
        body = {"security": "allowlist", "ask": "on-miss", "allowlist": ["/usr/bin/ls"]}
        assert api.put("/api/approvals/policy", json=body).status_code == 200
        yield api
        api.put("/api/approvals/policy", json={"security": "full"})


@pytest.mark.parametrize(
    ("button", "decision", "kept"), [("Deny", "deny", True), ("Allow once", "allow-once", False)]
)
def test_a_waiting_command_is_answered_with_a_button(
    page: Any,
    stack: LocalStack,
    fake_llm: FakeLLM,
    allowlist: httpx.Client,
    button: str,
    decision: str,
    kept: bool,
):
    (stack.workspace / "web.txt").write_text("keep")
    fake_llm.reply_tool_calls(("exec", {"command": "ls && rm -f web.txt"}))
    fake_llm.reply_text("all done")
    page.goto(stack.url)
    page.fill("#input", "tidy up")
    page.press("#input", "Enter")

    box = page.locator(".approval")
    expect(box).to_have_count(1, timeout=30_000)
    expect(box.locator(".approval-command")).to_have_text("$ ls && rm -f web.txt")
    expect(box).to_contain_text("/workspace")
    expect(box).to_contain_text("/usr/bin/rm is not in the allowlist")
    waiting = allowlist.get("/api/approvals").json()["approvals"]
    assert [a["id"] for a in waiting] == [box.locator(".approval-id").text_content()]

    box.get_by_role("button", name=button).click()
    expect(box.locator(".approval-state")).to_have_text(f"answered: {decision}", timeout=15_000)
    expect(page.locator(".msg.assistant .text").last).to_have_text("all done", timeout=15_000)
    ended = "failed" if kept else "ok"  # a denial is a tool error the model reads
    expect(page.locator(f"details.tool.{ended} .tool-name")).to_have_text("exec")
    assert (stack.workspace / "web.txt").exists() == kept
    assert allowlist.get("/api/approvals").json()["approvals"] == []


def test_a_command_of_another_client_shows_as_a_card(
    page: Any, stack: LocalStack, fake_llm: FakeLLM, allowlist: httpx.Client
):
    page.goto(stack.url)
    expect(page.locator("#input")).to_be_enabled()
    (stack.workspace / "card.txt").write_text("keep")
    fake_llm.reply_tool_calls(("exec", {"command": "rm -f card.txt"}))
    fake_llm.reply_text("it stays")
    sent = allowlist.post("/api/chat", json={"message": "from elsewhere", "session_id": "cli"})
    card = page.locator(".approval-card")
    expect(card).to_have_count(1, timeout=30_000)
    expect(card.locator(".approval-command")).to_have_text("$ rm -f card.txt")
    card.get_by_role("button", name="Deny").click()
    expect(card).to_have_count(0, timeout=15_000)
    task = sent.json()["task_id"]
    deadline = time.monotonic() + 30
    while allowlist.get(f"/api/tasks/{task}").json()["status"] != "completed":
        assert time.monotonic() < deadline, "the turn never ended"
        time.sleep(0.1)
    assert (stack.workspace / "card.txt").exists()


def test_a_question_waiting_before_the_page_opened_shows_too(
    page: Any, stack: LocalStack, fake_llm: FakeLLM, allowlist: httpx.Client
):
    fake_llm.reply_tool_calls(("exec", {"command": "rm -f early.txt"}))
    fake_llm.reply_text("ok")
    sent = allowlist.post("/api/chat", json={"message": "early", "session_id": "early"})
    deadline = time.monotonic() + 30
    while not allowlist.get("/api/approvals").json()["approvals"]:
        assert time.monotonic() < deadline, "no question was asked"
        time.sleep(0.05)
    page.goto(stack.url)
    card = page.locator(".approval-card")
    expect(card).to_have_count(1, timeout=15_000)
    card.get_by_role("button", name="Allow once").click()
    expect(card).to_have_count(0, timeout=15_000)
    task = sent.json()["task_id"]
    while allowlist.get(f"/api/tasks/{task}").json()["status"] != "completed":
        assert time.monotonic() < deadline + 30, "the turn never ended"
        time.sleep(0.1)
