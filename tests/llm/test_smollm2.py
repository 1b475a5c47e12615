"""Smoke test against a real tiny model: shapes only (the model is 135M parameters)."""

from __future__ import annotations

import json
import time

import httpx
import pytest

pytestmark = pytest.mark.llm


def run_turn(url: str, message: str) -> tuple[dict, list[dict]]:
    with httpx.Client(base_url=url, timeout=600) as api:
        task_id = api.post("/api/chat", json={"message": message}).json()["task_id"]
        events = []
        with api.stream("GET", f"/api/tasks/{task_id}/events") as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line.removeprefix("data: ")))
        return api.get(f"/api/tasks/{task_id}").json(), events


def test_a_forced_real_tool_call_runs_in_the_sandbox(stack_factory):
    stack = stack_factory(CRAYFISH_LLM_FIRST_TOOL_CHOICE="exec")
    started = time.monotonic()
    task, events = run_turn(stack.url, "Run the shell command `echo hello-from-smollm`.")
    assert task["status"] == "completed", task
    finished = [e for e in events if e["type"] == "tool.finished" and e["tool"] == "exec"]
    assert finished, [(e["type"], e.get("tool"), e.get("output")) for e in events]
    assert isinstance(task["result"], str)
    assert "<tool_call>" not in task["result"]
    print(f"turn took {time.monotonic() - started:.1f}s, {len(events)} events")


def test_answers_never_show_raw_call_syntax(stack_factory):
    stack = stack_factory()
    task, events = run_turn(stack.url, "List the files in the workspace with the exec tool.")
    assert task["status"] == "completed", task
    recovered = [e for e in events if e["type"] == "tool.started"]
    reasked = [e for e in events if e["type"] == "llm.reask"]
    for marker in ("<tool_call>", '"arguments"', "[TOOL_CALLS]"):
        assert marker not in task["result"]
    print(f"tool calls run: {len(recovered)}, re-asks: {len(reasked)}")


def test_several_auto_turns_end_cleanly(stack_factory):
    """On `auto` the tiny model may call, write a call as text, or just talk: all end cleanly."""
    stack = stack_factory()
    prompts = [
        "What files are in the workspace? Use a tool.",
        "Write the word hello into a file named hello.txt.",
        "Run `uname -a` for me.",
    ]
    counts = {"tool calls run": 0, "re-asks": 0}
    for prompt in prompts:
        task, events = run_turn(stack.url, prompt)
        assert task["status"] == "completed", task
        assert task["result"].strip()
        for marker in ("<tool_call>", "[TOOL_CALLS]", "<function="):
            assert marker not in task["result"]
        counts["tool calls run"] += sum(e["type"] == "tool.started" for e in events)
        counts["re-asks"] += sum(e["type"] == "llm.reask" for e in events)
    print(f"auto mode over {len(prompts)} turns: {counts}")
