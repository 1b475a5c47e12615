"""Deleting a session over HTTP: the tool-runner closes that session's sandbox, then the history
goes; a turn sent meanwhile waits and starts a fresh session."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from crayfish.tool_runner.v1 import tool_runner_pb2, tool_runner_pb2_grpc
from crayfish_common.grpc_server import GrpcService
from orchestrator.agent.turn_context import without_turn_context
from orchestrator.app import create_app

from tests.fakes import FakeLLM

from .conftest import ScriptedToolService, make_settings


class ClosingToolService(ScriptedToolService):
    """The scripted tools, plus a CloseSession that takes half a second and records the ids."""

    def __init__(self) -> None:
        super().__init__()
        self.closing = asyncio.Event()
        self.closed: list[str] = []

    async def CloseSession(self, request, context):
        self.closing.set()
        await asyncio.sleep(0.5)
        self.closed.append(request.session_id)
        return tool_runner_pb2.CloseSessionResponse()


@pytest.fixture
async def api(
    tmp_path: Path, fake_llm: FakeLLM
) -> AsyncIterator[tuple[httpx.AsyncClient, ClosingToolService]]:
    servicer = ClosingToolService()
    service = GrpcService(
        ["crayfish.tool_runner.v1.ToolRunnerService"],
        [lambda s: tool_runner_pb2_grpc.add_ToolRunnerServiceServicer_to_server(servicer, s)],
    )
    port = await service.start("127.0.0.1:0")
    app = create_app(make_settings(tmp_path, fake_llm.base_url, port))
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            loopback = "http://127.0.0.1"
            async with httpx.AsyncClient(transport=transport, base_url=loopback) as client:
                yield client, servicer
    finally:
        await service.stop(0)


async def chat(client: httpx.AsyncClient, session_id: str, message: str) -> dict[str, Any]:
    reply = await client.post("/api/chat", json={"session_id": session_id, "message": message})
    assert reply.status_code == 202, reply.text
    for _ in range(200):
        task: dict[str, Any] = (await client.get(f"/api/tasks/{reply.json()['task_id']}")).json()
        if task["status"] in ("completed", "failed", "cancelled"):
            return task
        await asyncio.sleep(0.05)
    raise AssertionError("the turn did not finish")


async def contents(client: httpx.AsyncClient, session_id: str) -> list[str]:
    history = (await client.get(f"/api/sessions/{session_id}")).json()["messages"]
    return [m["content"] for m in history]


async def test_delete_closes_that_sessions_sandbox_then_the_history(api, fake_llm: FakeLLM):
    client, tool_runner = api
    for session_id in ("boat", "garden"):
        fake_llm.reply_text("noted")
        assert (await chat(client, session_id, "hi"))["status"] == "completed"
    assert (await client.delete("/api/sessions/boat")).status_code == 204
    assert tool_runner.closed == ["boat"]
    assert (await client.get("/api/sessions/boat")).status_code == 404
    assert await contents(client, "garden") == ["hi", "noted"]


async def test_a_turn_sent_during_the_delete_starts_a_fresh_session(api, fake_llm: FakeLLM):
    client, tool_runner = api
    fake_llm.reply_text("old answer")
    await chat(client, "boat", "old question")
    deleting = asyncio.create_task(client.delete("/api/sessions/boat"))
    await tool_runner.closing.wait()
    fake_llm.reply_text("new answer")
    task = await chat(client, "boat", "new question")
    assert (await deleting).status_code == 204
    assert (task["status"], task["result"]) == ("completed", "new answer")
    assert await contents(client, "boat") == ["new question", "new answer"]
    sent = [without_turn_context(m["content"]) for m in fake_llm.last_request["messages"][1:]]
    assert sent == ["new question"]  # the model never saw the deleted history
