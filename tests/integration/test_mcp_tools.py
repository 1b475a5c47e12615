"""MCP servers' tools through the whole stack: the connectors service runs the toy MCP server
(services/connectors/tests/mcp_servers, the `mcp` SDK) over stdio and reaches a second copy over
streamable HTTP; the model calls `mcp_<server>_<tool>` through the orchestrator."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from devstack.launcher import free_port
from tests.fakes import FakeLLM, Reply
from tests.stacks import wait_task

TOY_SERVER = Path(__file__).resolve().parents[2] / (
    "services/connectors/tests/mcp_servers/toy_server.py"
)
REMOTE_PORT = free_port()
# Outside the stack's workspace (the connectors service refuses a file inside it).
CONFIG = Path(tempfile.mkdtemp(prefix="crayfish-mcp-config-")) / "mcp.json"
CONFIG.write_text(
    json.dumps(
        {
            "mcpServers": {
                "toy": {"command": sys.executable, "args": [str(TOY_SERVER)]},
                "remote": {
                    "url": f"http://127.0.0.1:{REMOTE_PORT}/mcp",
                    "allowTools": ["echo"],
                    "timeout": 10,
                },
            }
        }
    )
)
STACK_ENV = {
    "CONNECTORS_MCP_CONFIG": str(CONFIG),
    # A stopped server is found within a second, not after the default 15 s probe.
    "CONNECTORS_MCP_PROBE_INTERVAL": "0.5",
    "CONNECTORS_MCP_BACKOFF_MIN": "0.2",
    "CONNECTORS_MCP_BACKOFF_MAX": "1",
}


def tool_outputs(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def quote_tools(body: dict[str, Any]) -> Reply:
    return Reply(text="The tool said: " + " | ".join(tool_outputs(body)))


def chat(api: httpx.Client, message: str) -> dict[str, Any]:
    accepted = api.post("/api/chat", json={"message": message})
    assert accepted.status_code == 202, accepted.text
    return wait_task(api, accepted.json()["task_id"])


def listed(api: httpx.Client) -> dict[str, dict[str, Any]]:
    response = api.get("/api/tools")
    assert response.status_code == 200, response.text
    return {t["name"]: t for t in response.json()["tools"]}


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module", autouse=True)
def remote_server() -> Iterator[subprocess.Popen[bytes]]:
    """The toy server over streamable HTTP on loopback, started before the stack (and the
    config folder removed after it)."""
    process = subprocess.Popen(
        [sys.executable, str(TOY_SERVER), "streamable-http", str(REMOTE_PORT)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while not listening(REMOTE_PORT):
        assert process.poll() is None, "the toy MCP server exited at start-up"
        assert time.monotonic() < deadline, "the toy MCP server did not listen"
        time.sleep(0.05)
    yield process
    if process.poll() is None:
        process.kill()
        process.wait()
    shutil.rmtree(CONFIG.parent, ignore_errors=True)


def test_the_model_calls_an_mcp_tool_and_the_answer_reaches_the_user(
    api: httpx.Client, fake_llm: FakeLLM
):
    seen = len(fake_llm.requests)
    fake_llm.reply_tool_calls(("mcp_toy_echo", {"text": "hello from the model"}))
    fake_llm.reply_with(quote_tools)
    task = chat(api, "ask the toy server to echo something")
    assert task["status"] == "completed", task
    assert task["result"] == "The tool said: echo: hello from the model"
    first, second = fake_llm.requests[seen:]
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert {"mcp_toy_echo", "mcp_toy_deep", "mcp_remote_echo", "exec"} <= set(offered)
    assert "mcp_remote_fail" not in offered  # allowTools
    # The $ref schema of `deep` reaches the model inlined (the fake rejects what OpenAI does).
    assert "$ref" not in json.dumps(offered["mcp_toy_deep"]["parameters"])
    assert tool_outputs(second) == ["echo: hello from the model"]


def test_an_mcp_error_is_a_result_the_model_reads(api: httpx.Client, fake_llm: FakeLLM):
    seen = len(fake_llm.requests)
    fake_llm.reply_tool_calls(("mcp_toy_fail", {"reason": "no disk"}))
    fake_llm.reply_with(quote_tools)
    task = chat(api, "try the failing tool")
    assert task["status"] == "completed", task
    [output] = tool_outputs(fake_llm.requests[seen + 1])
    assert "the toy server refused: no disk" in output
    assert "no disk" in task["result"]


def test_api_tools_lists_mcp_tools_and_marks_a_stopped_server_unavailable(
    api: httpx.Client, fake_llm: FakeLLM, remote_server: subprocess.Popen[bytes]
):
    tools = listed(api)
    assert tools["mcp_toy_echo"]["service"] == "connectors"
    assert tools["mcp_toy_echo"]["description"] == "Echoes the text back."
    assert tools["mcp_remote_echo"]["description"] == "Echoes the text back."
    remote_server.kill()
    remote_server.wait()
    deadline = time.monotonic() + 20  # the probe (0.5 s) and the orchestrator's 5 s list cache
    while not listed(api)["mcp_remote_echo"]["description"].startswith("[unavailable"):
        assert time.monotonic() < deadline, listed(api)["mcp_remote_echo"]
        time.sleep(0.2)
    tools = listed(api)
    assert tools["mcp_remote_echo"]["description"] == (
        "[unavailable: MCP server remote is reconnecting] Echoes the text back."
    )
    assert tools["mcp_toy_echo"]["description"] == "Echoes the text back."  # the other is fine
    seen = len(fake_llm.requests)
    fake_llm.reply_tool_calls(("mcp_remote_echo", {"text": "x"}), ("mcp_toy_echo", {"text": "y"}))
    fake_llm.reply_with(quote_tools)
    task = chat(api, "echo on both")
    assert task["status"] == "completed", task
    remote, toy = tool_outputs(fake_llm.requests[seen + 1])
    assert "MCP server 'remote' is unavailable" in remote, remote
    assert toy == "echo: y"
