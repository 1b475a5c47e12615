"""The MCP servers file: the Claude Desktop / nanobot shape, and clear errors for broken ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from connectors.core import ConnectorsCore
from connectors.mcp_config import ConfigError, load_config, parse_config


def test_claude_desktop_shape_with_our_extras() -> None:
    config = parse_config(
        {
            "mcpServers": {
                "files": {
                    "command": "npx",
                    "args": ["-y", "@modelcontextprotocol/server-filesystem", "/data"],
                    "env": {"TOKEN": "t"},
                    "cwd": "/srv",
                    "timeout": 5,
                    "denyTools": ["delete"],
                },
                "remote": {"url": "https://mcp.example.org/mcp", "headers": {"X-Key": "k"}},
                "old": {"url": "http://127.0.0.1:9/sse", "transport": "sse"},
                "off": {"command": "x", "disabled": True},
            }
        }
    )
    files, remote, old = config.servers
    assert (files.transport, files.command, files.args) == (
        "stdio",
        "npx",
        ("-y", "@modelcontextprotocol/server-filesystem", "/data"),
    )
    assert (files.env, files.cwd, files.timeout) == ({"TOKEN": "t"}, "/srv", 5.0)
    assert not files.offers("delete") and files.offers("read")
    assert (remote.transport, remote.headers, remote.timeout) == (
        "streamable-http",
        {"X-Key": "k"},
        30.0,
    )
    assert old.transport == "sse"
    assert config.problems == []


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"comand": "x"}, "unknown keys ['comand']"),
        ({}, 'give "command"'),
        ({"command": ""}, '"command" must be a non-empty string'),
        ({"command": "x", "args": "one two"}, '"args" must be a list of strings'),
        ({"command": "x", "env": {"N": 1}}, '"env" must be an object of string values'),
        ({"command": "x", "url": "http://h/"}, "not both"),
        ({"url": "ftp://h/"}, '"url" must be an http'),
        ({"url": "http://h/", "transport": "carrier-pigeon"}, "unknown transport"),
        ({"command": "x", "timeout": -1}, '"timeout" must be seconds'),
        ({"command": "x", "allowTools": "echo"}, '"allowTools" must be a list'),
        ("npx server", "expected an object"),
    ],
)
def test_a_broken_entry_is_named_and_skipped(entry, problem: str) -> None:
    config = parse_config({"mcpServers": {"bad": entry, "good": {"command": "ok"}}})
    assert [s.name for s in config.servers] == ["good"]
    [line] = config.problems
    assert line.startswith("server 'bad': ") and problem in line
    assert problem in config.broken["bad"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "is not valid JSON: Expecting property name"),
        ('{"servers": {}}', 'expected an object with "mcpServers"'),
        ("[]", 'expected an object with "mcpServers"'),
    ],
)
def test_a_broken_file_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path, tmp_path / "workspace")


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read MCP config"):
        load_config(tmp_path / "nope.json", None)


def test_a_config_inside_the_workspace_is_refused(tmp_path: Path, make_settings) -> None:
    workspace = tmp_path / "workspace"
    inside = workspace / "mcp.json"
    inside.write_text(json.dumps({"mcpServers": {}}))
    with pytest.raises(ConfigError, match="inside the workspace"):
        ConnectorsCore(make_settings(inside))
    # A symlink from outside into the workspace is the same file: refused too.
    link = tmp_path / "link.json"
    link.symlink_to(inside)
    with pytest.raises(ConfigError, match="inside the workspace"):
        ConnectorsCore(make_settings(link))


def test_a_malformed_allow_list_is_a_clear_error(make_settings) -> None:
    with pytest.raises(ConfigError, match="CONNECTORS_WEB_FETCH_ALLOW: allow-list entry 'x'"):
        ConnectorsCore(make_settings(web_fetch_allow="x"))


def stdio_config(tmp_path: Path, **entry: object) -> Path:
    path = tmp_path / "config" / "mcp.json"
    path.parent.mkdir(exist_ok=True)
    servers = {"ok": {"command": "python3"}, "planted": entry}
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def program(folder: Path, name: str = "server") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_a_stdio_server_run_from_the_workspace_stops_the_service(
    tmp_path: Path, make_settings
) -> None:
    """A sandboxed command could write that program; this service would run it unsandboxed."""
    workspace = tmp_path / "workspace"
    inside = program(workspace / "bin")
    outside = tmp_path / "opt" / "server"
    outside.parent.mkdir()
    outside.symlink_to(inside)
    cases = [
        ({"command": str(inside)}, f'"command" {inside} is inside the workspace'),
        ({"command": str(outside)}, f'"command" {outside} is inside the workspace'),  # symlink
        ({"command": "bin/server", "cwd": str(workspace)}, '"cwd"'),
        ({"command": "server", "env": {"PATH": f"/usr/bin:{workspace}/bin"}}, "the PATH folder"),
        ({"command": "later", "env": {"PATH": f"{workspace}/tools"}}, "the PATH folder"),
    ]
    for entry, problem in cases:
        with pytest.raises(ConfigError) as refused:
            ConnectorsCore(make_settings(stdio_config(tmp_path, **entry)))
        assert "server 'planted': " + problem in str(refused.value), entry
        assert "sandboxed commands can write there" in str(refused.value)


def test_a_stdio_server_outside_the_workspace_may_be_given_it_as_an_argument(
    tmp_path: Path, make_settings
) -> None:
    workspace = tmp_path / "workspace"
    path = stdio_config(tmp_path, command=str(program(tmp_path / "opt")), args=[str(workspace)])
    core = ConnectorsCore(make_settings(path))  # refusals happen here, before any start
    assert sorted(s.name for s in core.servers()) == ["ok", "planted"]


def test_a_server_timeout_past_the_orchestrators_is_warned_about_at_start(
    tmp_path: Path, make_settings, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    path = tmp_path / "mcp.json"
    servers = {"slow": {"command": "python3", "timeout": 600}, "quick": {"command": "python3"}}
    path.write_text(json.dumps({"mcpServers": servers}))
    monkeypatch.setenv("CRAYFISH_TOOL_TIMEOUT", "120")  # the orchestrator's setting, as make run
    with caplog.at_level("WARNING", logger="connectors.core"):
        ConnectorsCore(make_settings(path))
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warning.startswith(
        "MCP server 'slow': its timeout (600 s) is longer than the orchestrator's tool timeout"
        " (CRAYFISH_TOOL_TIMEOUT, 120 s)"
    )
    caplog.clear()
    monkeypatch.delenv("CRAYFISH_TOOL_TIMEOUT")  # the orchestrator's default, 300 s, is known
    with caplog.at_level("WARNING", logger="connectors.core"):
        ConnectorsCore(make_settings(path))
    assert "(CRAYFISH_TOOL_TIMEOUT, 300 s)" in caplog.text
