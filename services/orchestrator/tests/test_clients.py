"""The typed clients over real gRPC: dataclasses back, a typed error per status, named services."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from crayfish.tool_runner.v1 import tool_runner_pb2_grpc
from crayfish_common.grpc_server import GrpcService
from orchestrator.api.errors import service_failure
from orchestrator.clients import (
    DeadlineExceeded,
    InvalidArgument,
    NotFound,
    ServiceError,
    ServiceUnavailable,
    ToolServiceClient,
)
from orchestrator.clients.tool_runner import ToolRunnerClient

from devstack.launcher import free_port

from .conftest import ScriptedToolService

TOOL_RUNNER = "crayfish.tool_runner.v1.ToolRunnerService"
# Tool name -> the status the service aborts a call of it with.
ABORTS = {
    "gone": grpc.StatusCode.NOT_FOUND,
    "not-now": grpc.StatusCode.FAILED_PRECONDITION,
    "broken": grpc.StatusCode.INTERNAL,
}


class AbortingToolService(ScriptedToolService):
    async def RunTool(self, request, context):
        if request.name in ABORTS:
            await context.abort(ABORTS[request.name], f"{request.name}: as scripted")
        return await super().RunTool(request, context)


@pytest.fixture
async def address() -> AsyncIterator[str]:
    servicer = AbortingToolService()
    service = GrpcService(
        [TOOL_RUNNER],
        [lambda s: tool_runner_pb2_grpc.add_ToolRunnerServiceServicer_to_server(servicer, s)],
    )
    port = await service.start("127.0.0.1:0")
    yield f"127.0.0.1:{port}"
    await service.stop(0)


async def run(client: ToolServiceClient, name: str, **arguments: object) -> str:
    result = await client.run_tool(name, arguments, session_id="s", call_id="c", deadline=2.0)
    return result.output


async def test_any_service_name_lists_and_runs_tools(address: str) -> None:
    client = ToolServiceClient("toys", address, TOOL_RUNNER, rpc_timeout=2.0)
    try:
        specs = {spec.name: spec for spec in await client.list_tools()}
        assert specs["echo"].parameters["required"] == ["text"]
        assert await run(client, "echo", text="hi") == "echo: hi"
        assert (await client.health()).ok
    finally:
        await client.close()


async def test_streamed_output_reaches_the_sink_before_the_result(address: str) -> None:
    client = ToolRunnerClient(address, rpc_timeout=2.0)
    seen: list[tuple[str, str]] = []

    async def sink(stream: str, text: str) -> None:
        seen.append((stream, text))

    try:
        result = await client.run_tool(
            "echo", {"text": "x"}, session_id="s", call_id="c", deadline=2.0, on_output=sink
        )
    finally:
        await client.close()
    assert seen == [("stdout", "echo: x")] and result.ok


@pytest.mark.parametrize(
    ("tool", "error", "http"),
    [("gone", NotFound, 404), ("not-now", InvalidArgument, 400), ("broken", ServiceError, 502)],
)
async def test_each_status_raises_its_typed_error(
    address: str, tool: str, error: type[ServiceError], http: int
) -> None:
    client = ToolServiceClient("toys", address, TOOL_RUNNER, rpc_timeout=2.0)
    try:
        with pytest.raises(ServiceError) as caught:
            await run(client, tool)
    finally:
        await client.close()
    assert type(caught.value) is error
    assert (caught.value.service, caught.value.reason) == ("toys", f"{tool}: as scripted")
    assert service_failure(caught.value).status == http


async def test_a_slow_call_is_a_deadline_and_a_dead_service_unavailable(address: str) -> None:
    slow = ToolServiceClient("toys", address, TOOL_RUNNER, rpc_timeout=2.0)
    dead = ToolServiceClient("ghost", f"127.0.0.1:{free_port()}", TOOL_RUNNER, rpc_timeout=2.0)
    try:
        with pytest.raises(DeadlineExceeded):
            await slow.run_tool("sleep", {"seconds": 2}, session_id="", call_id="", deadline=0.2)
        with pytest.raises(ServiceUnavailable, match="the ghost service answered UNAVAILABLE"):
            await dead.list_tools()
        state = await dead.health()
    finally:
        await slow.close()
        await dead.close()
    assert not state.ok and state.detail.startswith("UNAVAILABLE")
    failure = service_failure(ServiceUnavailable("ghost", "UNAVAILABLE", "connection refused"))
    assert (failure.status, failure.code) == (503, "unavailable")
    assert failure.message.startswith("the ghost service is unavailable")
