"""db_query over real gRPC (crayfish.common.v1.ToolService), as the orchestrator calls it."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from unittest import mock

import grpc
import pytest
from crayfish.common.v1 import tools_pb2, tools_pb2_grpc
from crayfish_common.grpc_server import GrpcService
from crayfish_common.tool_service import TOOL_SERVICE_NAME, ToolSetServicer
from db_query_tool.__main__ import build_tools
from db_query_tool.config import DbQuerySettings
from grpc_health.v1 import health_pb2, health_pb2_grpc


def settings(database: Path, **env: str) -> DbQuerySettings:
    values = {"DB_QUERY_DATABASE": str(database), **env}
    with mock.patch.dict(os.environ, values):
        return DbQuerySettings()  # type: ignore[call-arg]


@pytest.fixture
async def channel(database: Path) -> AsyncIterator[grpc.aio.Channel]:
    servicer = ToolSetServicer(build_tools(settings(database, DB_QUERY_MAX_ROWS="3")))
    service = GrpcService([TOOL_SERVICE_NAME], [servicer.register])
    port = await service.start("127.0.0.1:0")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as opened:
        yield opened
    await service.stop(0)


async def run(channel: grpc.aio.Channel, arguments: dict[str, object]) -> tools_pb2.RunToolResponse:
    stub = tools_pb2_grpc.ToolServiceStub(channel)
    request = tools_pb2.RunToolRequest(name="db_query", arguments_json=json.dumps(arguments))
    return await stub.RunTool(request, timeout=10)


async def test_the_service_lists_db_query_with_its_schema(channel: grpc.aio.Channel):
    listed = await tools_pb2_grpc.ToolServiceStub(channel).ListTools(tools_pb2.ListToolsRequest())
    (spec,) = listed.tools
    assert spec.name == "db_query"
    assert json.loads(spec.parameters_json)["required"] == ["sql"]
    health = health_pb2_grpc.HealthStub(channel)
    reply = await health.Check(health_pb2.HealthCheckRequest(service=""))
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_a_query_answers_with_rows_and_says_when_it_cut_them(channel: grpc.aio.Channel):
    reply = await run(channel, {"sql": "SELECT id, name FROM hosts WHERE id < ?", "params": [3]})
    assert reply.ok
    assert reply.output.splitlines() == [
        'columns: ["id", "name"]',
        '[1, "web-1"]',
        '[2, "web-2"]',
        "(2 rows)",
    ]
    assert json.loads(reply.result_json)["rows"] == [[1, "web-1"], [2, "web-2"]]
    many = await run(channel, {"sql": "SELECT minute FROM cpu"})
    assert many.ok and many.truncated and "first 3 rows only" in many.output


async def test_refusals_and_bad_arguments_are_results_the_model_can_read(channel: grpc.aio.Channel):
    refused = await run(channel, {"sql": "DELETE FROM hosts"})
    assert not refused.ok and "only reads" in refused.output
    missing = await run(channel, {"query": "SELECT 1"})
    assert not missing.ok and "'sql' is a required property" in missing.output


def test_a_missing_database_file_stops_start_up(tmp_path: Path):
    with pytest.raises(ValueError, match="no SQLite file"):
        settings(tmp_path / "absent.db")
