"""Orchestrator test fixtures: the scripted fake LLM and a scripted tool service over real gRPC."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from unittest import mock

import pytest
from crayfish.common.v1 import tools_pb2
from crayfish.memory.v1 import memory_pb2_grpc
from crayfish.tool_runner.v1 import tool_runner_pb2, tool_runner_pb2_grpc
from crayfish_common.grpc_server import GrpcService
from orchestrator.config import Settings
from orchestrator.core import OrchestratorCore

from devstack.launcher import free_port
from tests.fakes import FakeLLM
from tests.postgres import fresh_database

TOY_TOOLS = {
    "echo": ("Repeats the text back.", {"text": {"type": "string"}}, ["text"]),
    "sleep": ("Sleeps for some seconds, then says so.", {"seconds": {"type": "number"}}, []),
    "fail": ("Always fails.", {}, []),
    "memory_write": ("Saves a note to memory.", {"text": {"type": "string"}}, ["text"]),
}


class ScriptedToolService(tool_runner_pb2_grpc.ToolRunnerServiceServicer):
    """Deterministic toy tools behind the real tool-runner gRPC contract (loop tests only)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, object], float, float]] = []
        self.sessions: list[str] = []  # each call's session (its sandbox's), in order
        self.closed: list[str] = []  # the sessions closed (deleted), in order

    async def ListTools(self, request, context):
        return tools_pb2.ListToolsResponse(
            tools=[
                tools_pb2.ToolSpec(
                    name=name,
                    description=desc,
                    parameters_json=json.dumps(
                        {"type": "object", "properties": props, "required": req}
                    ),
                )
                for name, (desc, props, req) in TOY_TOOLS.items()
            ]
        )

    async def RunTool(self, request, context):
        args = json.loads(request.arguments_json or "{}")
        self.sessions.append(request.session_id)
        started = time.monotonic()
        if request.name == "sleep":
            await asyncio.sleep(float(args.get("seconds", 0)))
            output, ok = f"slept {args.get('seconds', 0)}s", True
        elif request.name == "memory_write":
            output, ok = "saved to memory/today.md#L1-L1", True
        elif request.name == "echo":
            output, ok = f"echo: {args['text']}", True
        else:
            output, ok = "Error: this tool always fails", False
        self.calls.append((request.name, args, started, time.monotonic()))
        return tools_pb2.RunToolResponse(ok=ok, output=output)

    async def RunToolStream(self, request, context):
        result = await self.RunTool(request, context)
        chunk = tool_runner_pb2.OutputChunk(stream="stdout", data=result.output.encode())
        yield tool_runner_pb2.RunToolEvent(chunk=chunk)
        yield tool_runner_pb2.RunToolEvent(result=result)

    async def DescribeSandbox(self, request, context):
        return tool_runner_pb2.DescribeSandboxResponse(backend="scripted")

    async def CloseSession(self, request, context):
        self.closed.append(request.session_id)
        return tool_runner_pb2.CloseSessionResponse()


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


class ScriptedMemoryTools(memory_pb2_grpc.MemoryServiceServicer):
    """The scripted tools behind the memory service's tool contract (its other RPCs: none)."""

    def __init__(self, tools: ScriptedToolService):
        self.tools = tools

    async def ListTools(self, request, context):
        return await self.tools.ListTools(request, context)

    async def RunTool(self, request, context):
        return await self.tools.RunTool(request, context)


@pytest.fixture
async def tool_service() -> AsyncIterator[tuple[ScriptedToolService, int]]:
    """The toy tools as the tool-runner's; also as the memory service's, for a test that points
    MEMORY_ADDR here (a `memory_` name belongs to the memory service: agent/tool_owners.py)."""
    servicer = ScriptedToolService()
    service = GrpcService(
        ["crayfish.tool_runner.v1.ToolRunnerService", "crayfish.memory.v1.MemoryService"],
        [
            lambda server: tool_runner_pb2_grpc.add_ToolRunnerServiceServicer_to_server(
                servicer, server
            ),
            lambda server: memory_pb2_grpc.add_MemoryServiceServicer_to_server(
                ScriptedMemoryTools(servicer), server
            ),
        ],
    )
    port = await service.start("127.0.0.1:0")
    yield servicer, port
    await service.stop(0)


def make_settings(tmp_path: Path, llm_url: str, tool_port: int, **overrides: object) -> Settings:
    dead = f"127.0.0.1:{free_port()}"  # memory and skills are down: their tools just vanish
    values: dict[str, object] = {
        "OPENAI_BASE_URL": llm_url,
        "OPENAI_API_KEY": "sk-test",
        "CRAYFISH_MODEL": "fake-model",
        "CRAYFISH_WORKSPACE": str(tmp_path / "workspace"),
        "CRAYFISH_DATA_DIR": str(tmp_path / "data"),
        "TOOL_RUNNER_ADDR": f"127.0.0.1:{tool_port}",
        "MEMORY_ADDR": dead,
        "SKILLS_ADDR": dead,
        "CRAYFISH_RPC_TIMEOUT": 2.0,
        "CRAYFISH_LLM_RETRY_BASE_DELAY": 0.01,
        "CRAYFISH_TRUSTED_HOSTS": "testserver",  # the Host of Starlette's TestClient
        **overrides,
    }
    if "CRAYFISH_DATABASE_URL" not in values:
        values["CRAYFISH_DATABASE_URL"] = fresh_database()
    (tmp_path / "workspace").mkdir(exist_ok=True)
    return settings_from_env(values)


def call_group(result: str) -> list[dict[str, object]]:
    """A tool step's message group: an assistant message calling `exec`, and its result."""
    call = {"id": "c1", "type": "function", "function": {"name": "exec", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": result},
    ]


def settings_from_env(env: Mapping[str, object]) -> Settings:
    """Settings read from these environment variables (set only while reading them)."""
    with mock.patch.dict(os.environ, {name: str(value) for name, value in env.items()}):
        return Settings()


@pytest.fixture
async def core_factory(
    tmp_path: Path, fake_llm: FakeLLM, tool_service: tuple[ScriptedToolService, int]
) -> AsyncIterator[object]:
    """Makes started cores; those of one test share a fresh database, as replicas would."""
    made: list[OrchestratorCore] = []
    database = fresh_database()

    async def make(**overrides: object) -> OrchestratorCore:
        overrides.setdefault("CRAYFISH_DATABASE_URL", database)
        settings = make_settings(tmp_path, fake_llm.base_url, tool_service[1], **overrides)
        core = OrchestratorCore(settings)
        made.append(core)
        await core.start()
        return core

    yield make
    for core in made:
        await core.close()
