"""Where `bin:` requirements are checked: the tool-runner's sandbox, or the local PATH (and why)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from crayfish.common.v1 import tools_pb2
from crayfish.skills.v1 import skills_pb2, skills_pb2_grpc
from crayfish.tool_runner.v1 import tool_runner_pb2, tool_runner_pb2_grpc
from crayfish_common.channels import aio_channel
from skills.server import start_service

from devstack.launcher import free_port

NEEDS = 'metadata: {{"nanobot": {{"requires": {{"bins": ["{bin}"]}}}}}}'


async def list_skills(settings) -> skills_pb2.ListSkillsResponse:
    service, core = await start_service(settings)
    try:
        async with aio_channel(f"127.0.0.1:{service.port}") as channel:
            stub = skills_pb2_grpc.SkillsServiceStub(channel)
            return await stub.ListSkills(skills_pb2.ListSkillsRequest())
    finally:
        await service.stop(0)
        await core.stop()


@pytest.fixture
def host_only_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An executable on this process's PATH that no sandbox has."""
    folder = tmp_path / "host-bin"
    folder.mkdir()
    tool = folder / "crayfish-host-only-tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return tool.name


NEEDS_ENV = 'metadata: {{"nanobot": {{"requires": {{"env": ["{name}"]}}}}}}'
TOKEN = "crayfish-token-value-5d1e"


@pytest.fixture
def token_here(monkeypatch: pytest.MonkeyPatch) -> str:
    """A variable this service has and no sandboxed command gets."""
    monkeypatch.setenv("CRAYFISH_TEST_TOKEN", TOKEN)
    return "CRAYFISH_TEST_TOKEN"


async def test_unreachable_tool_runner_falls_back_to_local_path(
    settings, write_skill, host_only_bin, token_here
):
    write_skill(settings.workspace_skills_dir, "host", extra=NEEDS.format(bin=host_only_bin))
    write_skill(settings.workspace_skills_dir, "token", extra=NEEDS_ENV.format(name=token_here))
    settings.tool_runner_addr = f"127.0.0.1:{free_port()}"
    reply = await list_skills(settings)
    assert "local PATH (tool-runner 127.0.0.1:" in reply.requirements_source
    assert "unreachable: UNAVAILABLE" in reply.requirements_source
    assert "env requirements unknown, shown as missing" in reply.requirements_source
    skills = {s.name: s for s in reply.skills}
    assert skills["host"].available
    assert list(skills["token"].missing) == [f"env:{token_here}"]
    assert TOKEN not in str(reply)


async def test_without_a_tool_runner_this_services_environment_decides(
    settings, write_skill, token_here
):
    write_skill(settings.workspace_skills_dir, "token", extra=NEEDS_ENV.format(name=token_here))
    reply = await list_skills(settings)
    assert (
        reply.requirements_source == "local PATH and environment (SKILLS_TOOL_RUNNER_ADDR not set)"
    )
    assert {s.name: s for s in reply.skills}["token"].available
    assert TOKEN not in str(reply)


@pytest.fixture
def runner_dirs() -> Iterator[tuple[Path, Path]]:
    """Workspace and data folders the sandbox uid can enter (pytest's tmp_path is 0700)."""
    workspace = Path(tempfile.mkdtemp(prefix="crayfish-skills-ws-", dir="/tmp"))
    workspace.chmod(0o755)
    data = Path(tempfile.mkdtemp(prefix="crayfish-skills-tr-", dir="/tmp"))
    yield workspace, data
    shutil.rmtree(workspace, ignore_errors=True)
    shutil.rmtree(data, ignore_errors=True)


async def test_real_tool_runner_sandbox_decides(
    settings, write_skill, host_only_bin, token_here, runner_dirs
):
    """The default (bwrap) tool-runner: a bin only the host has is missing in the sandbox, and
    so is a variable only this service has; what every command gets (HOME) is there."""
    tool_runner = pytest.importorskip("tool_runner.server", reason="tool-runner not installed")
    from tool_runner.config import ToolRunnerSettings

    workspace, data = runner_dirs
    runner_settings = ToolRunnerSettings(
        host="127.0.0.1", port=0, workspace=workspace, data_dir=data
    )
    runner, toolbox = await tool_runner.start_service(runner_settings)
    try:
        skills = settings.workspace_skills_dir
        write_skill(skills, "host", extra=NEEDS.format(bin=host_only_bin))
        write_skill(skills, "shell", extra=NEEDS.format(bin="sh"))
        write_skill(skills, "token", extra=NEEDS_ENV.format(name=token_here))
        write_skill(skills, "home", extra=NEEDS_ENV.format(name="HOME"))
        settings.tool_runner_addr = f"127.0.0.1:{runner.port}"
        reply = await list_skills(settings)
        seen_by_a_command = await command_env_names(runner.port)
        described = await describe(runner.port)
    finally:
        await runner.stop(0)
        await toolbox.sandbox.stop()
    assert reply.requirements_source == f"tool-runner 127.0.0.1:{runner.port} (bwrap sandbox)"
    found = {s.name: s for s in reply.skills}
    assert list(found["host"].missing) == [f"bin:{host_only_bin}"]
    assert found["shell"].available and found["home"].available
    assert list(found["token"].missing) == [f"env:{token_here}"]
    assert TOKEN not in str(reply) and TOKEN not in str(described)
    # What DescribeSandbox reports is what a command really gets (the shell adds PWD).
    assert set(described.env_names) == seen_by_a_command - {"PWD", "SHLVL", "_"}


async def describe(port: int) -> tool_runner_pb2.DescribeSandboxResponse:
    async with aio_channel(f"127.0.0.1:{port}") as channel:
        stub = tool_runner_pb2_grpc.ToolRunnerServiceStub(channel)
        return await stub.DescribeSandbox(tool_runner_pb2.DescribeSandboxRequest())


async def command_env_names(port: int) -> set[str]:
    """Names of the variables `env` prints when run through the tool-runner's exec tool."""
    async with aio_channel(f"127.0.0.1:{port}") as channel:
        stub = tool_runner_pb2_grpc.ToolRunnerServiceStub(channel)
        request = tools_pb2.RunToolRequest(name="exec", arguments_json='{"command": "env"}')
        reply = await stub.RunTool(request)
    assert reply.ok, reply.output
    stdout = json.loads(reply.result_json)["stdout"]
    return {line.split("=", 1)[0] for line in stdout.splitlines() if "=" in line}


async def test_unwatched_catalog_rescans_on_every_request(settings, write_skill):
    settings.watch = False
    service, core = await start_service(settings)
    try:
        async with aio_channel(f"127.0.0.1:{service.port}") as channel:
            stub = skills_pb2_grpc.SkillsServiceStub(channel)
            write_skill(settings.workspace_skills_dir, "instant", description="Seen at once.")
            reply = await stub.ListSkills(skills_pb2.ListSkillsRequest())
            assert "instant" in {s.name for s in reply.skills}
    finally:
        await service.stop(0)
        await core.stop()
