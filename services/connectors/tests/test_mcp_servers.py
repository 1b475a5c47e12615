"""Real MCP servers (the SDK's own server) over stdio, streamable HTTP and SSE: tools offered,
called, failing, hanging, crashing and coming back, changing their list."""

from __future__ import annotations

import json
import os

import pytest
from connectors.transports import CLEAN_PATH

from .conftest import stdio_entry, wait_for

MINIMAL_ENV = {
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "PYTHONUNBUFFERED",
    "LOGNAME",
    "USER",
    "SHELL",
    "TERM",
}

TRANSPORTS = ["stdio", "streamable-http"]


@pytest.fixture
def toy_entry(request, http_toy):
    """entry(**extra) for the toy server over the test's transport."""
    transport = request.param

    def entry(**extra):
        if transport == "stdio":
            return stdio_entry(**extra)
        return http_toy(transport).entry(**extra)

    entry.transport = transport
    return entry


def names(core) -> set[str]:
    return {tool.name for tool in core.tool_set()}


async def run(core, name: str, **args):
    return await core.tool_set().run(name, json.dumps(args))


@pytest.mark.parametrize("toy_entry", [*TRANSPORTS, "sse"], indirect=True)
async def test_tools_are_offered_and_called(toy_entry, write_config, make_settings, make_core):
    core = await make_core(make_settings(write_config({"toy": toy_entry()})))
    assert {"web_fetch", "mcp_toy_echo", "mcp_toy_fail", "mcp_toy_deep"} <= names(core)
    echo = core.tool_set().tools["mcp_toy_echo"]
    assert echo.description == "Echoes the text back."
    assert echo.parameters["required"] == ["text"]

    result = await run(core, "mcp_toy_echo", text="hello")
    assert (result.ok, result.output) == (True, "echo: hello")

    # $ref/$defs were inlined, so the model sees the fields and validation uses them.
    deep = core.tool_set().tools["mcp_toy_deep"].parameters
    assert "$defs" not in deep and deep["properties"]["a"]["properties"]["x"]["type"] == "integer"
    assert (await run(core, "mcp_toy_deep", a={"x": 1, "y": 2}, b={"x": 4, "y": 6})).output == "7"
    bad = await run(core, "mcp_toy_deep", a={"x": "far"}, b={})
    assert not bad.ok and "invalid arguments" in bad.output


@pytest.mark.parametrize("toy_entry", TRANSPORTS, indirect=True)
async def test_is_error_reaches_the_model_as_a_readable_error(
    toy_entry, write_config, make_settings, make_core
):
    core = await make_core(make_settings(write_config({"toy": toy_entry()})))
    result = await run(core, "mcp_toy_fail", reason="disk full")
    assert not result.ok
    assert "the toy server refused: disk full" in result.output
    assert result.output.startswith("Error: ")
    # The connection is still fine afterwards.
    assert (await run(core, "mcp_toy_echo", text="x")).ok


@pytest.mark.parametrize("toy_entry", TRANSPORTS, indirect=True)
async def test_a_hanging_tool_times_out_and_the_server_stays_usable(
    toy_entry, write_config, make_settings, make_core
):
    core = await make_core(make_settings(write_config({"toy": toy_entry(timeout=1)})))
    result = await run(core, "mcp_toy_hang")
    assert not result.ok
    assert "did not answer within 1 s" in result.output
    assert (await run(core, "mcp_toy_echo", text="still here")).output == "echo: still here"


@pytest.mark.parametrize("toy_entry", TRANSPORTS, indirect=True)
async def test_list_changed_refreshes_the_tool_list(
    toy_entry, write_config, make_settings, make_core
):
    core = await make_core(make_settings(write_config({"toy": toy_entry()})))
    assert "mcp_toy_shout" not in names(core)
    assert (await run(core, "mcp_toy_grow")).ok
    await wait_for(lambda: "mcp_toy_shout" in names(core))
    assert (await run(core, "mcp_toy_shout", text="quiet")).output == "QUIET"


async def test_a_crashed_stdio_server_is_reported_then_restarted(
    write_config, make_settings, make_core
):
    core = await make_core(make_settings(write_config({"toy": stdio_entry()})))
    connection = core.bridge.connections["toy"]
    crashed = await run(core, "mcp_toy_crash")
    assert not crashed.ok
    assert "MCP server 'toy'" in crashed.output and "reconnecting" in crashed.output
    await wait_for(lambda: connection.connects == 2 and connection.state == "ready")
    assert (await run(core, "mcp_toy_echo", text="back")).output == "echo: back"


async def test_a_dead_http_server_is_unavailable_until_it_comes_back(
    http_toy, write_config, make_settings, make_core
):
    toy = http_toy("streamable-http")
    settings = make_settings(write_config({"toy": toy.entry()}), mcp_probe_interval=0.3)
    core = await make_core(settings)
    connection = core.bridge.connections["toy"]
    toy.stop()
    await wait_for(lambda: connection.state == "unavailable")
    # Its tools stay listed, marked unavailable, and a call says why.
    echo = core.tool_set().tools["mcp_toy_echo"]
    assert echo.description.startswith("[unavailable: MCP server toy is reconnecting]")
    result = await run(core, "mcp_toy_echo", text="anyone?")
    assert not result.ok and "MCP server 'toy' is unavailable" in result.output
    [status] = core.servers()
    assert status.state == "unavailable" and status.error

    toy.start()
    await wait_for(lambda: connection.state == "ready")
    assert (await run(core, "mcp_toy_echo", text="again")).output == "echo: again"


async def test_stdio_server_gets_a_clean_environment(
    write_config, make_settings, make_core, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-of-the-service")
    monkeypatch.setenv("CRAYFISH_API_TOKEN", "token-of-the-service")
    config = write_config({"toy": stdio_entry(env={"TOY_SETTING": "given"})})
    core = await make_core(make_settings(config))
    result = await run(core, "mcp_toy_environment")
    environment = json.loads(result.output)
    assert environment["TOY_SETTING"] == "given"
    assert "sk-secret-of-the-service" not in result.output
    assert "token-of-the-service" not in result.output
    assert not {"OPENAI_API_KEY", "CRAYFISH_API_TOKEN"} & set(environment)
    # Exactly the minimal base and its own entry: nothing inherited from the service.
    assert set(environment) == {*MINIMAL_ENV, "TOY_SETTING"}
    assert environment["PATH"] != os.environ["PATH"] or os.environ["PATH"] == CLEAN_PATH


async def test_allow_and_deny_lists_pick_the_offered_tools(write_config, make_settings, make_core):
    config = write_config(
        {
            "only": stdio_entry(allowTools=["echo", "fail"], denyTools=["fail"]),
            "most": stdio_entry(denyTools=["crash", "hang"]),
        }
    )
    core = await make_core(make_settings(config))
    offered = names(core)
    assert {n for n in offered if n.startswith("mcp_only_")} == {"mcp_only_echo"}
    assert "mcp_most_echo" in offered
    assert not {"mcp_most_crash", "mcp_most_hang"} & offered


async def test_a_broken_entry_is_reported_and_the_others_still_run(
    write_config, make_settings, make_core
):
    config = write_config(
        {"good": stdio_entry(), "typo": {"comand": "x"}, "gone": {"command": "/no/such/server"}}
    )
    core = await make_core(make_settings(config))
    assert "mcp_good_echo" in names(core)
    statuses = {s.name: s for s in core.servers()}
    assert statuses["good"].state == "ready"
    assert statuses["typo"].state == "misconfigured" and "comand" in statuses["typo"].error
    assert statuses["gone"].state == "unavailable"
    assert "no/such/server" in statuses["gone"].error or "No such file" in statuses["gone"].error
