"""Where `bin:` requirements are checked: the tool-runner's sandbox, or the local PATH (and why)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from crayfish.skills.v1 import skills_pb2, skills_pb2_grpc
from crayfish_common.channels import aio_channel
from crayfish_common.launcher import free_port
from skills.server import start_service

NEEDS = 'metadata: {{"nanobot": {{"requires": {{"bins": ["{bin}"]}}}}}}'


async def list_skills(settings) -> skills_pb2.ListSkillsResponse:
    service, hub = await start_service(settings)
    try:
        async with aio_channel(f"127.0.0.1:{service.port}") as channel:
            stub = skills_pb2_grpc.SkillsServiceStub(channel)
            return await stub.ListSkills(skills_pb2.ListSkillsRequest())
    finally:
        await service.stop(0)
        await hub.stop()


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


async def test_unreachable_tool_runner_falls_back_to_local_path(
    settings, write_skill, host_only_bin
):
    write_skill(settings.workspace_skills_dir, "host", extra=NEEDS.format(bin=host_only_bin))
    settings.tool_runner_addr = f"127.0.0.1:{free_port()}"
    reply = await list_skills(settings)
    assert "local PATH (tool-runner 127.0.0.1:" in reply.requirements_source
    assert "unreachable: UNAVAILABLE" in reply.requirements_source
    assert {s.name: s for s in reply.skills}["host"].available


@pytest.fixture
def runner_dirs() -> Iterator[tuple[Path, Path]]:
    """Workspace and data folders the sandbox uid can enter (pytest's tmp_path is 0700)."""
    workspace = Path(tempfile.mkdtemp(prefix="crayfish-skills-ws-", dir="/tmp"))
    workspace.chmod(0o755)
    data = Path(tempfile.mkdtemp(prefix="crayfish-skills-tr-", dir="/tmp"))
    yield workspace, data
    shutil.rmtree(workspace, ignore_errors=True)
    shutil.rmtree(data, ignore_errors=True)


async def test_real_tool_runner_sandbox_decides(settings, write_skill, host_only_bin, runner_dirs):
    """The default (bwrap) tool-runner: a bin only the host has is missing in the sandbox."""
    tool_runner = pytest.importorskip("tool_runner.server", reason="tool-runner not installed")
    from tool_runner.config import ToolRunnerSettings

    workspace, data = runner_dirs
    runner_settings = ToolRunnerSettings(
        host="127.0.0.1", port=0, workspace=workspace, data_dir=data
    )
    runner, toolbox = await tool_runner.start_service(runner_settings)
    try:
        write_skill(settings.workspace_skills_dir, "host", extra=NEEDS.format(bin=host_only_bin))
        write_skill(settings.workspace_skills_dir, "shell", extra=NEEDS.format(bin="sh"))
        settings.tool_runner_addr = f"127.0.0.1:{runner.port}"
        reply = await list_skills(settings)
    finally:
        await runner.stop(0)
        await toolbox.sandbox.stop()
    assert reply.requirements_source == f"tool-runner 127.0.0.1:{runner.port} (bwrap sandbox)"
    skills = {s.name: s for s in reply.skills}
    assert list(skills["host"].missing) == [f"bin:{host_only_bin}"]
    assert skills["shell"].available


async def test_unwatched_catalog_rescans_on_every_request(settings, write_skill):
    settings.watch = False
    service, hub = await start_service(settings)
    try:
        async with aio_channel(f"127.0.0.1:{service.port}") as channel:
            stub = skills_pb2_grpc.SkillsServiceStub(channel)
            write_skill(settings.workspace_skills_dir, "instant", description="Seen at once.")
            reply = await stub.ListSkills(skills_pb2.ListSkillsRequest())
            assert "instant" in {s.name for s in reply.skills}
    finally:
        await service.stop(0)
        await hub.stop()
