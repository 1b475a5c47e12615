"""Skill folders offered to commands: read-only at /skills/<name>, reported by DescribeSandbox."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from crayfish.tool_runner.v1 import tool_runner_pb2
from pydantic import ValidationError
from tool_runner.config import ToolRunnerSettings

from .conftest import is_root, start_docker_runner, start_runner, stop_runner

SCRIPT = "import sys\nprint('hello from', sys.argv[0])\n"


@pytest.fixture
def skill_root() -> Iterator[Path]:
    """A managed-skills folder with one skill and its script, readable by the sandbox uid."""
    root = Path(tempfile.mkdtemp(prefix="crayfish-skills-", dir="/tmp"))
    root.chmod(0o755)
    scripts = root / "greeter" / "scripts"
    scripts.mkdir(parents=True)
    (root / "greeter" / "SKILL.md").write_text("---\nname: greeter\ndescription: x\n---\nHi\n")
    (scripts / "hello.py").write_text(SCRIPT)
    for path in (root / "greeter", scripts):
        path.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


async def describe(runner) -> tool_runner_pb2.DescribeSandboxResponse:
    return await runner.stub.DescribeSandbox(tool_runner_pb2.DescribeSandboxRequest())


async def test_bwrap_mounts_skill_roots_read_only(workspace, data_dir, skill_root):
    service, channel, runner = await start_runner(
        workspace, data_dir, skill_roots={"managed": skill_root}
    )
    try:
        info = await describe(runner)
        assert dict(info.skill_roots) == {"managed": "/skills/managed"}
        assert info.workspace_path == "/workspace"
        ran = await runner.sh("python3 /skills/managed/greeter/scripts/hello.py")
        assert ran.exit_code == 0
        assert runner.data(ran)["stdout"] == "hello from /skills/managed/greeter/scripts/hello.py\n"
        wrote = await runner.sh("echo x > /skills/managed/greeter/new.txt")
        assert wrote.exit_code != 0 and "Read-only file system" in wrote.output
        removed = await runner.sh("rm -rf /skills/managed/greeter")
        assert removed.exit_code != 0
        assert (skill_root / "greeter" / "scripts" / "hello.py").read_text() == SCRIPT
        # A skill installed after start-up is visible at once (the folder is bound, not copied).
        (skill_root / "later").mkdir(mode=0o755)
        (skill_root / "later" / "SKILL.md").write_text("late\n")
        late = await runner.sh("cat /skills/managed/later/SKILL.md")
        assert runner.data(late)["stdout"] == "late\n"
    finally:
        await stop_runner(service, channel, runner)


@pytest.mark.skipif(not is_root(), reason="needs root to make a folder the sandbox uid can't read")
async def test_unreadable_or_missing_roots_are_warnings_not_failures(
    workspace, data_dir, skill_root
):
    private = Path(tempfile.mkdtemp(prefix="crayfish-private-", dir="/tmp"))  # 0700, root's
    try:
        roots = {"managed": skill_root, "private": private, "gone": Path("/nonexistent/skills")}
        service, channel, runner = await start_runner(workspace, data_dir, skill_roots=roots)
        try:
            info = await describe(runner)
            assert dict(info.skill_roots) == {"managed": "/skills/managed"}
            warnings = "\n".join(info.warnings)
            assert "'private'" in warnings and "cannot read" in warnings
            assert "'gone'" in warnings and "not a folder" in warnings
            listed = await runner.sh("ls /skills/managed")
            assert runner.data(listed)["stdout"] == "greeter\n"
        finally:
            await stop_runner(service, channel, runner)
    finally:
        shutil.rmtree(private, ignore_errors=True)


async def test_none_backend_offers_roots_at_their_host_paths(workspace, data_dir, skill_root):
    service, channel, runner = await start_runner(
        workspace, data_dir, sandbox="none", skill_roots={"managed": skill_root}
    )
    try:
        info = await describe(runner)
        assert dict(info.skill_roots) == {"managed": str(skill_root.resolve())}
        assert info.workspace_path == str(workspace.resolve())
        ran = await runner.sh(f"python3 {skill_root}/greeter/scripts/hello.py")
        assert ran.exit_code == 0 and "hello from" in ran.output
    finally:
        await stop_runner(service, channel, runner)


def test_root_names_are_checked():
    with pytest.raises(ValidationError, match="skill root name"):
        ToolRunnerSettings(skill_roots={"../up": Path("/tmp")})
    parsed = ToolRunnerSettings.model_validate({"skill_roots": {"builtin": "/opt/skills"}})
    assert parsed.skill_roots == {"builtin": Path("/opt/skills")}


@pytest.mark.docker
async def test_docker_mounts_skill_roots_read_only(workspace, data_dir, skill_root, docker_engine):
    service, channel, runner = await start_docker_runner(
        workspace, data_dir, docker_engine, skill_roots={"managed": skill_root}
    )
    try:
        info = await describe(runner)
        assert dict(info.skill_roots) == {"managed": "/skills/managed"}
        ran = await runner.sh("python3 /skills/managed/greeter/scripts/hello.py")
        assert ran.exit_code == 0 and "hello from" in ran.output
        wrote = await runner.sh("touch /skills/managed/greeter/new.txt")
        assert wrote.exit_code != 0 and "Read-only file system" in wrote.output
    finally:
        await stop_runner(service, channel, runner)
