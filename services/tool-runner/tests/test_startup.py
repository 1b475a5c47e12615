"""Start-up: `python -m tool_runner` serves, refuses a missing sandbox, `none` only when asked."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from crayfish.tool_runner.v1 import tool_runner_pb2
from crayfish_common.healthcheck import check
from tool_runner.sandbox.base import SandboxUnavailable
from tool_runner.sandbox.cgroups import GROUP, CgroupLimiter
from tool_runner.servicer import SERVICE_NAME

from devstack.launcher import free_port

from .conftest import start_runner, stop_runner


def _env(workspace: Path, data_dir: Path, port: int, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "TOOL_RUNNER_WORKSPACE": str(workspace),
            "TOOL_RUNNER_DATA_DIR": str(data_dir),
            "TOOL_RUNNER_PORT": str(port),
            "TOOL_RUNNER_HOST": "127.0.0.1",
            **extra,
        }
    )
    return env


def test_module_serves_and_reports_health(workspace, data_dir):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tool_runner"],
        env=_env(workspace, data_dir, port),
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not check(f"127.0.0.1:{port}", SERVICE_NAME, timeout=0.5):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "tool-runner never became healthy"
            time.sleep(0.1)
    finally:
        proc.terminate()
        assert proc.wait(timeout=15) == 0


def test_refuses_to_start_without_bubblewrap(workspace, data_dir, tmp_path):
    # A PATH without bwrap: the service must not fall back to anything weaker.
    empty_path = tmp_path / "bin"
    empty_path.mkdir()
    env = _env(workspace, data_dir, free_port(), PATH=str(empty_path))
    done = subprocess.run(
        [sys.executable, "-m", "tool_runner"], env=env, capture_output=True, timeout=30
    )
    assert done.returncode == 2
    assert b"refusing to start" in done.stderr and b"bubblewrap" in done.stderr


async def test_none_backend_is_explicit_and_reported_insecure(workspace, data_dir):
    service, channel, runner = await start_runner(workspace, data_dir, sandbox="none")
    try:
        info = await runner.stub.DescribeSandbox(tool_runner_pb2.DescribeSandboxRequest())
        assert info.backend == "none" and info.insecure
        assert any("ON THE HOST" in w for w in info.warnings)
        reply = await runner.sh("echo plain > made.txt && cat made.txt")
        assert reply.ok and "plain" in reply.output
    finally:
        await stop_runner(service, channel, runner)


async def test_per_command_cgroups_are_cleaned_up(workspace, data_dir):
    service, channel, runner = await start_runner(workspace, data_dir)
    limiter = runner.core.sandbox.cgroups
    if not limiter.parents:
        await stop_runner(service, channel, runner)
        pytest.skip(f"no per-command cgroups here: {limiter.problem}")
    await runner.sh("sleep 0.1 & echo hi")
    # The command's group goes once its namespace is torn down; what stays is one group per
    # warm sandbox waiting for the next command.
    waiting = runner.core.sandbox.pool
    await waiting.wait_filled()
    for _ in range(100):
        if all(len(_child_groups(p)) == len(waiting.ready) for p in limiter.parents.values()):
            break
        await asyncio.sleep(0.02)
    assert all(len(_child_groups(p)) == len(waiting.ready) for p in limiter.parents.values())
    await stop_runner(service, channel, runner)
    assert not any(p.exists() for p in limiter.parents.values())


def _child_groups(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.is_dir()]


def test_a_starting_runner_kills_what_a_dead_runner_left_in_its_cgroups():
    # A runner killed as a command started leaves that command running in its group.
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = CgroupLimiter()
    dead.group = f"{GROUP}-{gone.pid}-stale0"
    if not dead.setup():
        pytest.skip(f"no per-command cgroups here: {dead.problem}")
    orphan = subprocess.Popen([*dead.create(64, 16).shell_prefix(), "sleep", "60.0457"])
    try:
        time.sleep(0.2)
        assert orphan.poll() is None
        fresh = CgroupLimiter()
        assert fresh.setup()
        assert orphan.wait(timeout=5) == -9
        assert not any(p.exists() for p in dead.parents.values())
        asyncio.run(fresh.close())
    finally:
        orphan.kill()
        orphan.wait()


async def test_refuses_a_workspace_the_sandbox_uid_cannot_reach(tmp_path, data_dir):
    if os.geteuid() != 0:
        pytest.skip("only root hands commands to another uid")
    hidden = tmp_path / "private"  # pytest's tmp_path is mode 0700
    hidden.mkdir()
    os.chmod(tmp_path, 0o700)
    with pytest.raises(SandboxUnavailable, match="cannot traverse"):
        await start_runner(hidden / "workspace", data_dir)
