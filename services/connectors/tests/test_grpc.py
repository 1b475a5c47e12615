"""The service over real gRPC on a free port: health, ListTools, RunTool, ListServers."""

from __future__ import annotations

import json

from connectors.servicer import SERVICE_NAME
from crayfish.common.v1 import tools_pb2
from crayfish.connectors.v1 import connectors_pb2
from crayfish_common.channels import aio_channel
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .conftest import stdio_entry


async def test_mcp_and_web_fetch_tools_over_grpc(write_config, make_settings, serve) -> None:
    config = write_config({"toy": stdio_entry(timeout=2), "broken": {"url": "nope"}})
    served = await serve(make_settings(config))

    async with aio_channel(f"127.0.0.1:{served.port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        reply = await health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING

    listed = await served.stub.ListTools(tools_pb2.ListToolsRequest())
    specs = {spec.name: spec for spec in listed.tools}
    assert {"web_fetch", "mcp_toy_echo", "mcp_toy_fail"} <= set(specs)
    schema = json.loads(specs["mcp_toy_deep"].parameters_json)
    assert schema["type"] == "object" and "$ref" not in specs["mcp_toy_deep"].parameters_json

    echo = await served.stub.RunTool(
        tools_pb2.RunToolRequest(name="mcp_toy_echo", arguments_json='{"text": "over grpc"}')
    )
    assert (echo.ok, echo.output) == (True, "echo: over grpc")
    assert json.loads(echo.result_json) == {"structured": {"result": "echo: over grpc"}}

    failed = await served.stub.RunTool(
        tools_pb2.RunToolRequest(name="mcp_toy_fail", arguments_json='{"reason": "no"}')
    )
    assert not failed.ok and "the toy server refused: no" in failed.output

    hung = await served.stub.RunTool(tools_pb2.RunToolRequest(name="mcp_toy_hang"))
    assert not hung.ok and "did not answer within 2 s" in hung.error

    refused = await served.stub.RunTool(
        tools_pb2.RunToolRequest(name="web_fetch", arguments_json='{"url": "http://127.0.0.1/"}')
    )
    assert not refused.ok and "loopback" in refused.error

    servers = await served.stub.ListServers(connectors_pb2.ListServersRequest())
    states = {s.name: (s.state, s.transport) for s in servers.servers}
    assert states == {"toy": ("ready", "stdio"), "broken": ("misconfigured", "")}
    assert servers.config_problems == [
        "server 'broken': \"url\" must be an http:// or https:// URL"
    ]
    [toy] = [s for s in servers.servers if s.name == "toy"]
    assert toy.tool_count == 7


async def test_without_a_config_only_web_fetch_is_offered(make_settings, serve) -> None:
    served = await serve(make_settings())
    listed = await served.stub.ListTools(tools_pb2.ListToolsRequest())
    assert [spec.name for spec in listed.tools] == ["web_fetch"]
    servers = await served.stub.ListServers(connectors_pb2.ListServersRequest())
    assert list(servers.servers) == [] and list(servers.config_problems) == []
