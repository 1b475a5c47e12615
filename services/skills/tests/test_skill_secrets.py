"""Secrets in the tool-runner's secrets file meet `env:` requirements: all skills', or a bound
skill's alone; the catalog follows an edit of the file without a restart."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from crayfish.common.v1 import tools_pb2
from crayfish.skills.v1 import skills_pb2, skills_pb2_grpc
from crayfish_common.channels import aio_channel
from skills.server import start_service

NEEDS_ENV = 'metadata: {{"openclaw": {{"requires": {{"env": ["{name}"]}}}}}}'
TOKEN = "ghp_SkillSecret0123456789abc"
NPM = "npm_SkillSecret0123456789"


@pytest.fixture
def runner_dirs() -> Iterator[tuple[Path, Path, Path]]:
    """Workspace, data and secrets folders (the sandbox uid must enter the workspace)."""
    made = [Path(tempfile.mkdtemp(prefix=f"crayfish-{n}-", dir="/tmp")) for n in ("ws", "tr", "sf")]
    made[0].chmod(0o755)
    yield made[0], made[1], made[2]
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


def write_secrets(folder: Path, text: str) -> Path:
    path = folder / "secrets.env"
    path.write_text(text)
    path.chmod(0o600)
    return path


async def test_secrets_make_skills_available_bound_ones_only_their_own(
    settings, write_skill, runner_dirs
):
    tool_runner = pytest.importorskip("tool_runner.server", reason="tool-runner not installed")
    from tool_runner.config import ToolRunnerSettings

    workspace, data, folder = runner_dirs
    secrets = write_secrets(folder, f"NPM_TOKEN={NPM}\nGITHUB_TOKEN[github]={TOKEN}\n")
    runner, toolbox = await tool_runner.start_service(
        ToolRunnerSettings(
            host="127.0.0.1", port=0, workspace=workspace, data_dir=data, secrets_file=secrets
        )
    )
    skills = settings.workspace_skills_dir
    write_skill(skills, "github", extra=NEEDS_ENV.format(name="GITHUB_TOKEN"))
    write_skill(skills, "gist", extra=NEEDS_ENV.format(name="GITHUB_TOKEN"))
    write_skill(skills, "npm", extra=NEEDS_ENV.format(name="NPM_TOKEN"))
    settings.tool_runner_addr = f"127.0.0.1:{runner.port}"
    settings.bins_cache_seconds = 0.2
    service, core = await start_service(settings)
    try:
        async with aio_channel(f"127.0.0.1:{service.port}") as channel:
            stub = skills_pb2_grpc.SkillsServiceStub(channel)
            found = await skills_by_name(stub)
            assert found["github"].available and found["npm"].available
            assert list(found["gist"].missing) == ["env:GITHUB_TOKEN"]
            read = await stub.RunTool(
                tools_pb2.RunToolRequest(name="read_skill", arguments_json='{"name": "github"}')
            )
            assert "Secrets: GITHUB_TOKEN (values hidden)" in read.output
            assert 'with exec\'s "skill": "github" so they get them' in read.output
            # An edit of the file: the binding goes, and so does the skill's availability.
            write_secrets(folder, f"NPM_TOKEN={NPM}\n")
            for _ in range(50):
                found = await skills_by_name(stub)
                if not found["github"].available:
                    break
                await asyncio.sleep(0.1)
            assert list(found["github"].missing) == ["env:GITHUB_TOKEN"]
            assert found["npm"].available
            listing = str(await stub.ListSkills(skills_pb2.ListSkillsRequest()))
    finally:
        await service.stop(0)
        await core.stop()
        await runner.stop(0)
        await toolbox.close()
    assert TOKEN not in listing + read.output and NPM not in listing + read.output


async def skills_by_name(stub: skills_pb2_grpc.SkillsServiceStub) -> dict[str, skills_pb2.Skill]:
    reply = await stub.ListSkills(skills_pb2.ListSkillsRequest())
    return {skill.name: skill for skill in reply.skills}
