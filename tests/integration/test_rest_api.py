"""The REST surface on the real stack: sessions, memory, skills, heartbeat, metrics, OpenAI SDK."""

from __future__ import annotations

import asyncio
import io
import json
import time
import zipfile

import httpx
import openai
import pytest

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, Reply
from tests.stacks import wait_task


def chat(api: httpx.Client, message: str, session_id: str | None = None) -> dict:
    body = {"message": message, **({"session_id": session_id} if session_id else {})}
    return wait_task(api, api.post("/api/chat", json=body).json()["task_id"])


def test_sessions_can_be_listed_read_and_deleted(api: httpx.Client, fake_llm: FakeLLM):
    fake_llm.reply_text("noted")
    task = chat(api, "remember the milk", "groceries")
    assert task["status"] == "completed"
    listed = api.get("/api/sessions").json()["sessions"]
    assert any(s["id"] == "groceries" and s["title"] == "remember the milk" for s in listed)
    history = api.get("/api/sessions/groceries").json()["messages"]
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert api.delete("/api/sessions/groceries").status_code == 204
    assert api.get("/api/sessions/groceries").status_code == 404
    assert api.delete("/api/sessions/groceries").status_code == 404


def test_a_session_is_not_deleted_while_its_sandbox_cannot_be_closed(
    api: httpx.Client, fake_llm: FakeLLM, stack: LocalStack
):
    fake_llm.reply_text("noted")
    chat(api, "keep the receipt", "receipts")
    stack.kill("tool-runner")
    try:
        refused = api.delete("/api/sessions/receipts")
        assert refused.status_code == 503
        error = refused.json()["error"]
        assert error["code"] == "sandbox_unavailable" and "not deleted" in error["message"]
        history = api.get("/api/sessions/receipts").json()["messages"]
        assert [m["content"] for m in history] == ["keep the receipt", "noted"]
    finally:
        stack.start_one("tool-runner")
        stack.wait_healthy(timeout=60)
    # Trying again once the tool-runner is back finishes the job.
    deadline = time.monotonic() + 20
    while (status := api.delete("/api/sessions/receipts").status_code) == 503:
        assert time.monotonic() < deadline, "the delete kept failing after the restart"
        time.sleep(0.2)
    assert status == 204
    assert api.get("/api/sessions/receipts").status_code == 404


# The REST replies' fields, in order (the orchestrator's client dataclasses, sent as they are).
HIT_FIELDS = ["path", "start_line", "end_line", "score", "snippet", "citation", "source"]
SYNC_FIELDS = [
    "files_indexed",
    "files_unchanged",
    "files_removed",
    "chunks_indexed",
    "duration_ms",
    "skipped",
]
SKILL_FIELDS = ["name", "description", "location", "source", "available", "missing", "emoji"]
SKILL_FIELDS += ["always", "version", "shadowed", "warnings", "sandbox_folder"]


def test_memory_write_then_search_and_open_the_cited_lines(api: httpx.Client):
    written = api.post(
        "/api/memory/notes", json={"text": "The spare house key is under the blue flowerpot."}
    )
    assert written.status_code == 201, written.text
    note = written.json()
    assert note["path"].startswith("memory/") and note["citation"].startswith(note["path"] + "#L")
    found = api.post("/api/memory/search", json={"query": "where is the spare key"}).json()
    assert list(found) == ["hits", "strategy"]
    top = found["hits"][0]  # the note just written, its lines within the hit (maybe its heading)
    assert list(top) == HIT_FIELDS and list(note) == ["path", "start_line", "end_line", "citation"]
    assert top["path"] == note["path"] and "blue flowerpot" in top["snippet"]
    assert top["start_line"] <= note["start_line"] and top["end_line"] >= note["end_line"]
    lines = api.get(
        "/api/memory/file",
        params={"path": top["path"], "start_line": top["start_line"], "end_line": top["end_line"]},
    ).json()
    assert "blue flowerpot" in lines["text"]
    assert list(lines) == ["path", "start_line", "end_line", "total_lines", "text"]
    synced = api.post("/api/memory/sync").json()
    assert list(synced) == SYNC_FIELDS
    assert synced["files_unchanged"] >= 1


def test_memory_errors_are_clear(api: httpx.Client):
    assert api.post("/api/memory/search", json={"query": ""}).status_code == 400
    outside = api.get("/api/memory/file", params={"path": "../../etc/passwd"})
    assert outside.status_code == 400
    assert "is not a memory path" in outside.json()["error"]["message"]


def _skill_zip(name: str, description: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            f"{name}/SKILL.md", f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n"
        )
    return buffer.getvalue()


def test_skills_catalog_install_and_uninstall(api: httpx.Client, fake_llm: FakeLLM):
    fake_llm.reply_forever_text("noted")
    chat(api, "hello")  # the skills prompt is fresh: the install below must not wait for it
    catalog = api.get("/api/skills").json()
    assert list(catalog) == ["skills", "diagnostics", "version"]
    names = {s["name"] for s in catalog["skills"]}
    assert "weather-report" in names
    first = catalog["skills"][0]
    assert list(first) == SKILL_FIELDS
    installed = api.post(
        "/api/skills/install",
        params={"filename": "haiku.zip"},
        content=_skill_zip("haiku", "Write a haiku about anything."),
        headers={"content-type": "application/zip"},
    )
    assert installed.status_code == 201, installed.text
    assert installed.json()["skill"]["source"] == "managed"
    assert list(installed.json()) == ["skill", "digest", "warnings"]
    assert "haiku" in {s["name"] for s in api.get("/api/skills").json()["skills"]}
    chat(api, "write one")
    assert "<name>haiku</name>" in fake_llm.requests[-1]["messages"][0]["content"]
    assert api.delete("/api/skills/haiku").status_code == 204
    assert "haiku" not in {s["name"] for s in api.get("/api/skills").json()["skills"]}
    chat(api, "and now?")
    assert "<name>haiku</name>" not in fake_llm.requests[-1]["messages"][0]["content"]
    assert api.delete("/api/skills/haiku").status_code == 404


def test_bad_skill_archives_are_refused(api: httpx.Client):
    not_zip = api.post(
        "/api/skills/install",
        params={"filename": "x.zip"},
        content=b"this is not a zip",
        headers={"content-type": "application/zip"},
    )
    assert not_zip.status_code == 400 and not_zip.json()["error"]["message"]
    wrong_type = api.post(
        "/api/skills/install", content=b"x", headers={"content-type": "text/plain"}
    )
    assert wrong_type.status_code == 415


def test_heartbeat_skips_the_llm_without_tasks_and_drops_ok(
    api: httpx.Client, fake_llm: FakeLLM, stack: LocalStack
):
    heartbeat_md = stack.workspace / "HEARTBEAT.md"
    heartbeat_md.write_text("# HEARTBEAT\n<!-- nothing yet -->\n")
    before = len(fake_llm.requests)
    assert api.post("/api/heartbeat").json()["status"] == "skipped"
    assert len(fake_llm.requests) == before
    heartbeat_md.write_text("# HEARTBEAT\n- Check whether notes.md mentions a deadline.\n")
    fake_llm.reply_text("HEARTBEAT_OK")
    queued = api.post("/api/heartbeat").json()
    assert queued["status"] == "queued"
    task = wait_task(api, queued["task_id"])
    assert task["status"] == "completed" and task["delivered"] is False and task["result"] == ""
    assert "deadline" in fake_llm.last_request["messages"][-1]["content"]
    heartbeat_md.unlink()


def test_metrics_count_requests_tasks_and_tools(api: httpx.Client, fake_llm: FakeLLM):
    fake_llm.reply_tool_calls(("exec", {"command": "true"}))
    fake_llm.reply_text("ok")
    chat(api, "run true")
    text = api.get("/metrics").text
    assert 'crayfish_tool_calls_total{outcome="ok",tool="exec"}' in text  # names sorted
    assert 'crayfish_tasks_total{kind="chat",outcome="completed"}' in text
    assert 'crayfish_http_requests_total{method="POST",route="/api/chat",status="202"}' in text
    assert 'crayfish_llm_tokens_total{kind="prompt"}' in text


@pytest.fixture
def sdk(stack: LocalStack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.url}/v1", api_key="unused", max_retries=0)


def test_openai_sdk_non_streaming(sdk: openai.OpenAI, fake_llm: FakeLLM):
    fake_llm.reply_tool_calls(("exec", {"command": "echo from-the-sandbox"}))
    fake_llm.reply_with(
        lambda body: Reply(
            text="tool said " + [m for m in body["messages"] if m["role"] == "tool"][-1]["content"]
        )
    )
    reply = sdk.chat.completions.create(
        model="crayfish", messages=[{"role": "user", "content": "run it"}]
    )
    assert "from-the-sandbox" in (reply.choices[0].message.content or "")
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None and reply.usage.total_tokens > 0


def test_openai_sdk_streaming(sdk: openai.OpenAI, fake_llm: FakeLLM):
    # Paced like a real model (the pieces arrive over 0.3 s): text that arrives at once may
    # go out as one piece.
    fake_llm.reply_text("one two three four five six", delay=0.3)
    stream = sdk.chat.completions.create(
        model="crayfish",
        messages=[{"role": "user", "content": "count"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces, finish, usage = [], None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    assert "".join(pieces) == "one two three four five six"
    assert len([p for p in pieces if p]) > 1  # really streamed, not one blob
    assert finish == "stop" and usage is not None


def test_openai_errors_are_openai_shaped(sdk: openai.OpenAI, api: httpx.Client):
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model="crayfish", messages=[])
    assert caught.value.status_code == 400
    body = api.post("/v1/chat/completions", json={"model": "x"}).json()
    assert set(body["error"]) == {"message", "type", "code"}
    models = sdk.models.list()
    # The agent (its session's or the default preset), then the one preset CRAYFISH_MODEL makes.
    assert [m.id for m in models.data] == ["crayfish", "fake-model"]


def test_named_session_header_continues_a_conversation(stack: LocalStack, fake_llm: FakeLLM):
    fake_llm.reply_text("first")
    fake_llm.reply_with(lambda body: Reply(text=str(len(body["messages"]))))
    client = openai.OpenAI(
        base_url=f"{stack.url}/v1",
        api_key="unused",
        default_headers={"X-Crayfish-Session": "oai-named"},
    )
    client.chat.completions.create(model="crayfish", messages=[{"role": "user", "content": "a"}])
    second = client.chat.completions.create(
        model="crayfish", messages=[{"role": "user", "content": "b"}]
    )
    assert second.choices[0].message.content == "4"  # system, a, first, b


def test_a_client_that_disconnects_does_not_lose_the_answer(api: httpx.Client, fake_llm: FakeLLM):
    fake_llm.reply_text("slow answer", delay=1.0)
    with api.stream(
        "POST",
        "/v1/chat/completions",
        json={"model": "crayfish", "messages": [{"role": "user", "content": "x"}], "stream": True},
    ) as response:
        task_id = response.headers["x-crayfish-task"]
    # the client hung up before the answer; the task finishes anyway and keeps its result
    task = wait_task(api, task_id, timeout=20)
    assert task["status"] == "completed" and task["result"] == "slow answer"


def test_many_concurrent_streams_all_finish_and_leave_nothing_running(
    stack: LocalStack, fake_llm: FakeLLM
):
    fake_llm.reply_forever_text("concurrent answer", delay=0.3)
    body = {"model": "crayfish", "stream": True, "messages": [{"role": "user", "content": "hi"}]}

    async def one(client: httpx.AsyncClient) -> str:
        text = []
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: {") and '"content"' in line:
                    chunk = json.loads(line.removeprefix("data: "))
                    text += [c["delta"].get("content") or "" for c in chunk["choices"]]
        return "".join(text)

    async def many() -> list[str]:
        limits = httpx.Limits(max_connections=60)
        async with httpx.AsyncClient(base_url=stack.url, timeout=60, limits=limits) as client:
            return await asyncio.gather(*(one(client) for _ in range(40)))

    answers = asyncio.run(many())
    assert answers == ["concurrent answer"] * 40
    metrics = httpx.get(f"{stack.url}/metrics").text
    assert "crayfish_active_tasks 0" in metrics
