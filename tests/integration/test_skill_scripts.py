"""An installed skill's script runs in the sandbox: the prompt points at the folder commands see."""

from __future__ import annotations

import httpx

from tests.fakes import FakeLLM, Reply
from tests.integration.test_chat_turn import last_tool_output
from tests.stacks import sandbox_folder, wait_task, zip_bytes

SKILL = """---
name: shouter
description: Shout a word by running scripts/shout.py WORD.
---
Run `python3 scripts/shout.py WORD` from this skill's folder.
"""
SCRIPT = "import sys\nprint(sys.argv[1].upper() + '!!!')\n"


def skill_zip() -> bytes:
    return zip_bytes({"shouter/SKILL.md": SKILL, "shouter/scripts/shout.py": SCRIPT})


def test_an_installed_skills_script_runs_in_the_sandbox(api: httpx.Client, fake_llm: FakeLLM):
    installed = api.post(
        "/api/skills/install",
        params={"filename": "shouter.zip"},
        content=skill_zip(),
        headers={"content-type": "application/zip"},
    )
    assert installed.status_code == 201, installed.text
    try:
        folder = sandbox_folder(api, "shouter")
        assert folder == "/skills/managed/shouter"
        fake_llm.reply_tool_calls(("read_skill", {"name": "shouter"}))
        fake_llm.reply_tool_calls(("exec", {"command": f"python3 {folder}/scripts/shout.py hi"}))
        fake_llm.reply_with(lambda body: Reply(text=last_tool_output(body)))
        task = wait_task(api, api.post("/api/chat", json={"message": "shout hi"}).json()["task_id"])
        assert task["status"] == "completed", task
        assert "HI!!!" in task["result"]
        system = fake_llm.requests[0]["messages"][0]["content"]
        assert "<location>/skills/managed/shouter/SKILL.md</location>" in system
        skill_text = next(m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool")
        assert "Folder: /skills/managed/shouter (read-only" in skill_text["content"]
        # The workspace's own skills are shown where commands see them too.
        assert "<location>/workspace/skills/weather-report/SKILL.md</location>" in system
    finally:
        assert api.delete("/api/skills/shouter").status_code == 204
