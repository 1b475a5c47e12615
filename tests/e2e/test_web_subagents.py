"""The web page in headless Chromium: a subagent's session is listed right under the session
whose turn spawned it, with its label and status, and a child's report answered in the open
session shows without a reload."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, Reply

pytestmark = pytest.mark.slow  # starts the whole stack


def scout(fake: FakeLLM) -> Any:
    def reply(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        if "## Subagent" in messages[0]["content"]:
            return Reply(text="scouted: all clear")
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if not results:
            args = {"task": "scout the area", "label": "scout", "wait": True}
            return Reply(tool_calls=[fake.tool_call("spawn", args)])
        return Reply(text="The scout reports: " + results[-1].splitlines()[-1])

    return reply


def test_a_subagents_session_is_listed_under_its_parent(
    page: Any, stack: LocalStack, fake_llm: FakeLLM
):
    fake_llm.reply_forever_with(scout(fake_llm))
    page.goto(stack.url)
    page.fill("#input", "send a scout")
    page.click("#send")
    expect(page.locator(".msg.assistant .text").last).to_have_text(
        "The scout reports: scouted: all clear"
    )
    page.reload()  # the list as a fresh page loads it
    rows = page.locator("#sessions li")
    expect(rows.filter(has_text="↳ subagent scout")).to_have_count(1)
    titles = [t.strip() for t in rows.locator(".session-title").all_inner_texts()]
    parent = titles.index("send a scout")
    assert titles[parent + 1] == "↳ subagent scout", titles
    expect(rows.nth(parent + 1).locator(".session-meta")).to_contain_text("completed")
    fake_llm.reply_forever_with(None)


def test_a_report_answered_in_the_open_session_shows_at_once(
    page: Any, stack: LocalStack, fake_llm: FakeLLM
):
    def reply(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        if "## Subagent" in messages[0]["content"]:
            return Reply(text="the tide is low", delay=1)
        last = [m["content"] for m in messages if m["role"] == "user"][-1]
        if last.startswith("[Subagent report]"):
            return Reply(text="Your watcher says: the tide is low.")
        if not any(m["role"] == "tool" for m in messages):
            args = {"task": "watch the tide", "label": "watcher"}
            return Reply(tool_calls=[fake_llm.tool_call("spawn", args)])
        return Reply(text="A watcher is on it.")

    fake_llm.reply_forever_with(reply)
    page.goto(stack.url)
    page.fill("#input", "watch the tide for me")
    page.click("#send")
    answers = page.locator(".msg.assistant .text")
    expect(answers.last).to_have_text("A watcher is on it.")
    expect(answers.last).to_have_text("Your watcher says: the tide is low.", timeout=20_000)
    fake_llm.reply_forever_with(None)
