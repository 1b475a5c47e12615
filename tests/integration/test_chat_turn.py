"""A full chat turn across all four services: REST in, LLM, gRPC tools, answer out."""

from __future__ import annotations

import difflib
import itertools
import json
from typing import Any

import httpx

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, Reply
from tests.stacks import sandbox_folder, wait_task


def last_tool_output(body: dict[str, Any]) -> str:
    return [m for m in body["messages"] if m["role"] == "tool"][-1]["content"]


def first_difference(earlier: list[dict[str, Any]], later: list[dict[str, Any]]) -> str:
    """Where two requests' messages part, as a short diff (for a failing prefix check)."""
    for index, (old, new) in enumerate(zip(earlier, later, strict=False)):
        if old != new:
            lines = difflib.unified_diff(
                str(old.get("content")).splitlines(), str(new.get("content")).splitlines(), n=1
            )
            return f"message {index} changed:\n" + "\n".join(list(lines)[:20])
    return "later request is shorter"


def test_exec_runs_in_the_sandbox_and_the_answer_quotes_it(api: httpx.Client, fake_llm: FakeLLM):
    fake_llm.reply_tool_calls(("exec", {"command": "echo crayfish-$((6*7)) && id -u"}))
    fake_llm.reply_with(lambda body: Reply(text=f"The command said: {last_tool_output(body)}"))
    accepted = api.post("/api/chat", json={"message": "run the magic command"})
    assert accepted.status_code == 202
    task = wait_task(api, accepted.json()["task_id"])
    assert task["status"] == "completed", task
    assert "crayfish-42" in task["result"]
    tools = json.dumps(fake_llm.requests[0]["tools"])
    for name in ("exec", "read_file", "write_file", "list_dir", "memory_search", "read_skill"):
        assert f'"{name}"' in tools


def test_the_system_prompt_lists_real_tools_and_skills(api: httpx.Client, fake_llm: FakeLLM):
    fake_llm.reply_text("hi")
    task = wait_task(api, api.post("/api/chat", json={"message": "hello"}).json()["task_id"])
    assert task["status"] == "completed"
    system = fake_llm.last_request["messages"][0]["content"]
    assert "- exec: " in system and "- memory_search: " in system
    assert "weather-report" in system and "<available_skills>" in system
    assert "Ada is the user's sister" in system  # MEMORY.md is project context


def test_memory_search_returns_a_citation(api: httpx.Client, fake_llm: FakeLLM):
    fake_llm.reply_tool_calls(("memory_search", {"query": "database chosen for billing"}))
    fake_llm.reply_with(lambda body: Reply(text=last_tool_output(body)))
    task = wait_task(api, api.post("/api/chat", json={"message": "db?"}).json()["task_id"])
    assert task["status"] == "completed", task
    assert "MEMORY.md#L" in task["result"]
    assert "PostgreSQL" in task["result"]


def test_session_continues_with_history(api: httpx.Client, fake_llm: FakeLLM):
    fake_llm.reply_text("Nice to meet you, Sam.")
    fake_llm.reply_with(
        lambda body: Reply(text=f"I have {len(body['messages'])} messages of context.")
    )
    first = api.post("/api/chat", json={"message": "I am Sam"}).json()
    wait_task(api, first["task_id"])
    second = api.post(
        "/api/chat", json={"message": "who am I?", "session_id": first["session_id"]}
    ).json()
    assert second["session_id"] == first["session_id"]
    result = wait_task(api, second["task_id"])["result"]
    assert result == "I have 4 messages of context."  # system, user, assistant, user


def read_events(api: httpx.Client, task_id: str, last_id: int = 0) -> list[dict[str, Any]]:
    headers = {"Last-Event-ID": str(last_id)} if last_id else {}
    events = []
    with api.stream("GET", f"/api/tasks/{task_id}/events", headers=headers) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line.removeprefix("data: ")))
    return events


def test_event_stream_tells_the_story(api: httpx.Client, fake_llm: FakeLLM):
    fake_llm.reply_tool_calls(("exec", {"command": "echo streamed-$((40+2))"}))
    fake_llm.reply_text("all done")
    task_id = api.post("/api/chat", json={"message": "go"}).json()["task_id"]
    events = read_events(api, task_id)
    types = [e["type"] for e in events]
    for expected in ("task.started", "llm.request", "llm.response", "tool.started"):
        assert expected in types
    assert types[-1] == "task.completed"
    assert types.index("tool.finished") < types.index("assistant.message")
    output = "".join(e["text"] for e in events if e["type"] == "tool.output")
    assert "streamed-42" in output  # the command's output streamed as it ran
    finished = next(e for e in events if e["type"] == "tool.finished")
    assert finished["exit_code"] == 0 and finished["duration_ms"] > 0
    ids = [e["id"] for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_reconnecting_with_last_event_id_misses_nothing(api: httpx.Client, fake_llm: FakeLLM):
    fake_llm.reply_text("one two three")
    task_id = api.post("/api/chat", json={"message": "go"}).json()["task_id"]
    everything = read_events(api, task_id)
    middle = everything[len(everything) // 2]["id"]
    rest = read_events(api, task_id, last_id=middle)
    assert [e["id"] for e in rest] == [e["id"] for e in everything if e["id"] > middle]


def test_openai_compatible_completion(api: httpx.Client, fake_llm: FakeLLM):
    fake_llm.reply_text("pong")
    reply = api.post(
        "/v1/chat/completions",
        json={"model": "crayfish", "messages": [{"role": "user", "content": "ping"}]},
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["content"] == "pong"


def test_llm_failure_fails_the_task_with_a_reason(api: httpx.Client, fake_llm: FakeLLM):
    fake_llm.reply_error(400, "model `nope` does not exist", type="invalid_request_error")
    task = wait_task(api, api.post("/api/chat", json={"message": "hi"}).json()["task_id"])
    assert task["status"] == "failed"
    assert "does not exist" in task["error"]


def test_bad_requests_get_clear_json_errors(api: httpx.Client):
    bad_json = api.post(
        "/api/chat", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert bad_json.status_code == 400 and "error" in bad_json.json()
    empty = api.post("/api/chat", json={"message": ""})
    assert empty.status_code == 400 and "message" in empty.json()["error"]["message"]
    missing = api.get("/api/tasks/does-not-exist")
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "not_found_error"
    bad_session = api.post("/api/chat", json={"message": "x", "session_id": "../etc"})
    assert bad_session.status_code == 400


def test_health_and_readiness(api: httpx.Client):
    assert api.get("/healthz").json() == {"status": "ok"}
    ready = api.get("/readyz")
    assert ready.status_code == 200, ready.text
    body = ready.json()
    assert body["ready"] is True
    names = {d["name"] for d in body["dependencies"]}
    assert names == {"tool-runner", "memory", "skills", "connectors", "database"}
    assert body["sandbox"]["backend"] == "bwrap"


def test_auto_recall_puts_cited_memory_in_front_of_the_model(api: httpx.Client, fake_llm: FakeLLM):
    fake_llm.reply_text("She lives in Lisbon.")
    task_id = api.post("/api/chat", json={"message": "Where does my sister Ada live?"}).json()[
        "task_id"
    ]
    task = wait_task(api, task_id)
    assert task["status"] == "completed"
    sent = fake_llm.last_request["messages"][-1]["content"]
    assert sent.startswith("Where does my sister Ada live?")
    assert "Source: MEMORY.md#L" in sent and "Lisbon" in sent
    events = read_events(api, task_id)
    recall = next(e for e in events if e["type"] == "memory.recall")
    assert any(c.startswith("MEMORY.md#L") for c in recall["citations"])


def test_auto_recall_adds_nothing_when_memory_has_nothing(api: httpx.Client, fake_llm: FakeLLM):
    fake_llm.reply_text("ok")
    question = "Compute the integral of x squared from zero to three."
    wait_task(api, api.post("/api/chat", json={"message": question}).json()["task_id"])
    sent = fake_llm.last_request["messages"][-1]["content"]
    assert sent.startswith(question + "\n\n[Crayfish turn context] now=")
    assert "Memory recall" not in sent


def test_small_talk_goes_to_the_model_without_a_memory_recall(
    api: httpx.Client, fake_llm: FakeLLM, stack: LocalStack
):
    greeting = "Hello there, good morning!"
    note = {"text": f"How the user greets: {greeting}", "path": "memory/greetings.md"}
    assert api.post("/api/memory/notes", json=note).status_code == 201
    try:
        # A search with auto-recall's options finds the note: recalling it could happen.
        query = {"query": greeting, "top_k": 3, "min_score": 0.55}
        found = api.post("/api/memory/search", json=query).json()["hits"]
        assert any(hit["path"] == "memory/greetings.md" for hit in found), found
        fake_llm.reply_text("Good morning!")
        fake_llm.reply_text("She lives in Lisbon.")
        said = []
        for message in (greeting, "Where does my sister Ada live?"):
            accepted = api.post("/api/chat", json={"message": message, "session_id": "greet"})
            task_id = accepted.json()["task_id"]
            assert wait_task(api, task_id)["status"] == "completed"
            events = [e["type"] for e in read_events(api, task_id)]
            said.append((fake_llm.last_request["messages"][-1]["content"], events))
        (greeted, greeted_events), (asked, asked_events) = said
        assert "Memory recall" not in greeted and "memory.recall" not in greeted_events
        assert "Source: MEMORY.md#L" in asked and "memory.recall" in asked_events
    finally:
        (stack.workspace / "memory/greetings.md").unlink()
        api.post("/api/memory/sync")


def test_each_request_of_a_session_resends_the_previous_one_byte_for_byte(
    api: httpx.Client, fake_llm: FakeLLM
):
    """Provider prompt caching: request N+1 starts with request N's messages and its answer,
    with the same tools in the same order; the cached tokens the provider reports are counted."""
    # Once after start-up the skills service learns the sandbox and shows skills at their
    # sandbox paths: a one-time change of the prompt, so the test starts after it.
    sandbox_folder(api, "weather-report")
    fake_llm.prompt_cache = True
    try:
        session = "prompt-cache"
        first = len(fake_llm.requests)
        fake_llm.reply_text("Noted.")  # turn 1, with a memory recall in its user message
        fake_llm.reply_tool_calls(("exec", {"command": "echo cached"}))  # turn 2: a tool round
        fake_llm.reply_text("It said cached.")
        fake_llm.reply_text("Bye.")  # turn 3
        tasks = []
        for message in ("Where does my sister Ada live?", "run echo", "thanks"):
            accepted = api.post("/api/chat", json={"message": message, "session_id": session})
            tasks.append(wait_task(api, accepted.json()["task_id"]))
        assert [t["status"] for t in tasks] == ["completed"] * 3
        requests = fake_llm.requests[first:]
        assert len(requests) == 4
        for earlier, later in itertools.pairwise(requests):
            answered = len(earlier["messages"])
            assert later["messages"][:answered] == earlier["messages"], first_difference(
                earlier["messages"], later["messages"]
            )
            assert later["messages"][answered]["role"] == "assistant"  # then its answer
            assert later["tools"] == earlier["tools"]
            assert json.dumps(later["messages"][:answered]) == json.dumps(earlier["messages"])
        assert "Lisbon" in requests[1]["messages"][1]["content"]  # the recall stayed as sent
        assert tasks[2]["usage"]["cached_prompt_tokens"] > 0
        history = api.get(f"/api/sessions/{session}").json()["messages"]
        assert history[0] == {"role": "user", "content": "Where does my sister Ada live?"}
    finally:
        fake_llm.prompt_cache = False


def test_secrets_stay_out_of_the_sandbox_and_the_other_services(
    api: httpx.Client, fake_llm: FakeLLM, stack
):
    fake_llm.reply_tool_calls(("exec", {"command": "env; cat /proc/1/environ 2>&1; echo END"}))
    fake_llm.reply_with(lambda body: Reply(text=last_tool_output(body)))
    task = wait_task(api, api.post("/api/chat", json={"message": "env?"}).json()["task_id"])
    assert "END" in task["result"]
    assert "sk-integration" not in task["result"] and "OPENAI" not in task["result"]
    for name in ("tool-runner", "memory", "skills", "connectors"):
        environ = open(f"/proc/{stack.processes[name].pid}/environ", "rb").read()
        assert b"sk-integration" not in environ, name
