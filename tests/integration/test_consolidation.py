"""Memory consolidation on the real stack (the real memory service, the scripted LLM): a
conversation states a preference, consolidation runs on demand (`crayfish memory consolidate`),
and the model's edit lands in memory; a second run with nothing new is skipped.

`test_the_edit_lands_in_user_md_with_its_reason` needs `memory_edit` and the memory history
(branch mem-history, issue #32's versioned memory); without them it is skipped, saying so."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import httpx
import pytest

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, Reply
from tests.stacks import wait_task

STACK_FILES = {
    "MEMORY.md": "# MEMORY.md\n\n- The backup disk is /mnt/backup.\n",
    "USER.md": "# USER.md\n\n- Name: Ana\n- Drinks: green tea\n",
}
STACK_ENV = {
    "CRAYFISH_AUTO_RECALL": "false",
    "CRAYFISH_IDLE_SUMMARY_MINUTES": "0",  # summaries are made by the run itself here
    "CRAYFISH_CONSOLIDATE_INTERVAL": "0",  # on demand only
}
SUMMARY_PROMPT_START = "Summarise the conversation below"
TODAY = re.compile(r"Today is (\d{4}-\d{2}-\d{2})")


def crayfish(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """This tree's CLI (the installed script may belong to another checkout)."""
    return subprocess.run(
        [sys.executable, "-m", "crayfish_cli", "--url", url, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )


class Model:
    """Summaries repeat the user's last words; a consolidation makes `edit` (a tool call
    `(name, arguments)`) once, then reports."""

    def __init__(self, fake: FakeLLM, edit: tuple[str, dict[str, Any]]):
        self.fake = fake
        self.edit = edit
        self.consolidations: list[str] = []  # the message of each consolidation turn

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        if str(messages[0]["content"]).startswith(SUMMARY_PROMPT_START):
            said = str(messages[-1]["content"]).split("\n")
            return Reply(text="The user said: " + " ".join(s for s in said if "user:" in s))
        first = messages[1] if len(messages) > 1 else {}
        if str(first.get("content", "")).startswith("Memory consolidation."):
            if messages[-1]["role"] == "tool":
                return Reply(text=f"Changed memory: {messages[-1]['content'][:200]}")
            self.consolidations.append(str(first["content"]))
            return Reply(tool_calls=[self.fake.tool_call(*self.edit)])
        return Reply(text="Noted.")


def say(api: httpx.Client, session_id: str, text: str) -> None:
    accepted = api.post("/api/chat", json={"message": text, "session_id": session_id})
    assert accepted.status_code == 202, accepted.text
    assert wait_task(api, accepted.json()["task_id"])["status"] == "completed"


def consolidate(stack: LocalStack) -> str:
    run = crayfish(stack.url, "memory", "consolidate", "--wait", "90")
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_a_stated_preference_lands_in_todays_note(
    stack: LocalStack, api: httpx.Client, fake_llm: FakeLLM
) -> None:
    note = "- Ana takes her tea without sugar (session tea)"
    model = Model(fake_llm, ("memory_write", {"text": note}))
    fake_llm.reply_forever_with(model)
    say(api, "tea", "Please remember: I take my tea without sugar.")
    out = consolidate(stack)
    assert out.startswith("completed:"), out
    (message,) = model.consolidations
    assert "### Session tea" in message and "without sugar" in message
    assert "- Drinks: green tea" in message  # USER.md as it is, to quote from
    today = TODAY.search(message)
    assert today is not None
    lines = api.get("/api/memory/file", params={"path": f"memory/{today[1]}.md"}).json()
    assert note in lines["text"]
    # Nothing new since: skipped, no LLM request.
    asked = len(fake_llm.requests)
    assert consolidate(stack).startswith("skipped:")
    assert len(fake_llm.requests) == asked


def test_the_edit_lands_in_user_md_with_its_reason(
    stack: LocalStack, api: httpx.Client, fake_llm: FakeLLM
) -> None:
    tools = {tool["name"] for tool in api.get("/api/tools").json()["tools"]}
    if "memory_edit" not in tools:
        pytest.skip("needs memory_edit and the memory history (branch mem-history)")
    reason = "session oolong: the user now prefers oolong"
    edit = {
        "path": "USER.md",
        "old_text": "- Drinks: green tea",
        "new_text": "- Drinks: oolong, no sugar",
        "reason": reason,
    }
    model = Model(fake_llm, ("memory_edit", edit))
    fake_llm.reply_forever_with(model)
    say(api, "oolong", "I have switched from green tea to oolong, still no sugar.")
    assert consolidate(stack).startswith("completed:")
    user_md = (stack.workspace / "USER.md").read_text()
    assert "- Drinks: oolong, no sugar" in user_md and "green tea" not in user_md
    assert "- Name: Ana" in user_md  # a small edit, not a rewrite
    revisions = api.get("/api/memory/history").json()["revisions"]
    mine = [r for r in revisions if r["reason"] == reason]
    assert mine and "USER.md" in mine[0]["files"]
    assert mine[0]["author"] == "session:memory-consolidation"
