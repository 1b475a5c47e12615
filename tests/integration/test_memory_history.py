"""Versioned memory through the stack: the model's edits, REST restores, hand edits, the sandbox.

The fake LLM asks for the real tools (`memory_edit` on the memory service, `exec` in the real
bwrap sandbox of the tool-runner); the history is read back through REST and with the git CLI.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any

import httpx

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM
from tests.stacks import wait_task

STACK_FILES = {
    "MEMORY.md": "# Memory\n\n- The user's cat is called Miso.\n",
    "USER.md": "# User\n\n- Prefers tea.\n",
}


def history(api: httpx.Client, **params: Any) -> list[dict[str, Any]]:
    answer = api.get("/api/memory/history", params=params)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["revisions"])


def turn(api: httpx.Client, fake_llm: FakeLLM, *calls: tuple[str, dict[str, Any]]) -> dict:
    """One turn in which the model makes these tool calls; returns the finished task."""
    fake_llm.reply_tool_calls(*calls)
    fake_llm.reply_text("Done.")
    started = api.post("/api/chat", json={"message": "go on"}).json()
    task = wait_task(api, started["task_id"])
    assert task["status"] == "completed", task
    return task


def tool_results(fake_llm: FakeLLM) -> list[str]:
    return [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]


def wait_for_revision(
    api: httpx.Client, author: str, path: str, seen: set[str], timeout: float = 30
) -> dict:
    """The newest revision of `path` by `author` that is not in `seen`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [
            r for r in history(api, path=path) if r["author"] == author and r["rev"] not in seen
        ]
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"no new revision by {author} of {path} within {timeout} s")


def git(stack: LocalStack, *args: str) -> str:
    repo = stack.data_dir / "memory" / "history"
    done = subprocess.run(
        ["git", "--git-dir", str(repo), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def test_the_models_edit_is_a_revision_of_its_session_with_its_reason(api, fake_llm, stack):
    edit = {
        "path": "USER.md",
        "old_text": "- Prefers tea.",
        "new_text": "- Prefers green tea, no sugar.",
        "reason": "the user said so in session web-1",
    }
    task = turn(api, fake_llm, ("memory_edit", edit))
    assert tool_results(fake_llm)[-1].startswith("Edited USER.md"), tool_results(fake_llm)
    latest = history(api)[0]
    assert latest["author"] == f"session:{task['session_id']}"
    assert (latest["reason"], latest["files"]) == (edit["reason"], ["USER.md"])
    shown = api.get(f"/api/memory/history/{latest['rev'][:10]}").json()
    assert "-- Prefers tea." in shown["diff"] and "+- Prefers green tea, no sugar." in shown["diff"]
    # Real git: the CLI reads the same revision, author and reason.
    assert git(stack, "log", "-1", "--format=%H|%an|%s").strip() == (
        f"{latest['rev']}|session:{task['session_id']}|{edit['reason']}"
    )


def test_a_bad_edit_is_restored_and_recall_follows(api, fake_llm, stack):
    before = history(api, path="MEMORY.md")[0]["rev"]
    bad = {
        "path": "MEMORY.md",
        "old_text": "called Miso",
        "new_text": "called Rex",
        "reason": "misread session web-2",
    }
    turn(api, fake_llm, ("memory_edit", bad))
    assert "Rex" in (stack.workspace / "MEMORY.md").read_text()
    search = {"query": "Miso", "strategy": "keyword"}
    assert api.post("/api/memory/search", json=search).json()["hits"] == []

    restored = api.post("/api/memory/restore", json={"rev": before})
    assert restored.status_code == 200, restored.text
    body = restored.json()
    assert body["restored"] == before and "MEMORY.md" in body["files"]
    assert body["revision"]["author"] == "api"
    assert "called Miso" in (stack.workspace / "MEMORY.md").read_text()
    hits = api.post("/api/memory/search", json=search).json()["hits"]
    assert hits and hits[0]["path"] == "MEMORY.md"
    assert history(api)[0]["rev"] == body["revision"]["rev"]


def test_unknown_and_malformed_revisions_are_clear_errors(api):
    assert api.get("/api/memory/history/" + "0" * 40).status_code == 404
    assert api.post("/api/memory/restore", json={"rev": "deadbeef"}).status_code == 404
    assert api.post("/api/memory/restore", json={"rev": "HEAD~1"}).status_code == 400
    assert api.get("/api/memory/history/HEAD~1").status_code == 400


def test_a_hand_edit_in_the_sandbox_is_recorded(api, fake_llm, stack):
    seen = {r["rev"] for r in history(api, limit=1000)}
    command = "printf -- '- Sits by the window.\\n' >> USER.md"
    turn(api, fake_llm, ("exec", {"command": command}))
    assert tool_results(fake_llm)[-1].startswith("exit code: 0"), tool_results(fake_llm)
    revision = wait_for_revision(api, "hand", "USER.md", seen)
    assert (
        "+- Sits by the window." in api.get(f"/api/memory/history/{revision['rev']}").json()["diff"]
    )


def test_a_sandboxed_command_cannot_reach_the_history_repository(api, fake_llm, stack):
    repo = stack.data_dir / "memory" / "history"
    head_before = git(stack, "rev-parse", "HEAD").strip()
    assert (repo / "HEAD").is_file()  # it exists on the host, where the memory service keeps it
    probes = [
        f"ls {repo} && echo REACHED-ABSOLUTE",
        f"ls ../{repo.parent.parent.name}/memory && echo REACHED-PARENT",
        f"echo x > {repo}/HEAD && echo WROTE-HEAD",
        "find / -xdev -name packed-refs -path '*history*' 2>/dev/null | grep -q . && echo FOUND",
        # A link planted where memory reads: the history must not follow it.
        f"ln -s {repo}/HEAD memory/head.md; ln -s {repo} memory/repo",
        "true",
    ]
    # The same probes from an unsandboxed shell do reach it: they would notice a leak.
    host = subprocess.run(
        ["sh", "-c", "; ".join(probes[:2])], cwd=stack.workspace, capture_output=True, text=True
    )
    assert "REACHED-ABSOLUTE" in host.stdout and "REACHED-PARENT" in host.stdout, host
    turn(api, fake_llm, ("exec", {"command": "; ".join(probes)}))
    output = tool_results(fake_llm)[-1]
    assert output.startswith("exit code: 0"), output
    for marker in ("REACHED-ABSOLUTE", "REACHED-PARENT", "WROTE-HEAD", "FOUND"):
        assert marker not in output, output
    assert api.post("/api/memory/sync").status_code == 200
    assert git(stack, "rev-parse", "HEAD").strip() == head_before
    assert (repo / "HEAD").read_text().startswith("ref: refs/heads/")
    git(stack, "fsck", "--strict")
    for revision in history(api, limit=1000):
        assert not {"memory/head.md"} & set(revision["files"]), revision
