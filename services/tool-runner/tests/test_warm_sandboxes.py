"""Warm bwrap sandboxes: started ahead, each runs one command exactly as a cold start would."""

from __future__ import annotations

import asyncio

import pytest
from tool_runner.sandbox.process import kill_group

from .conftest import is_root, start_runner, stop_runner

pytestmark = pytest.mark.skipif(not is_root(), reason="bwrap's uid drop and cgroups need root")


async def filled(runner) -> list:  # type: ignore[no-untyped-def]
    pool = runner.core.sandbox.pool
    await pool.wait_filled()
    return list(pool.ready)


async def test_commands_take_warm_sandboxes_and_each_one_is_fresh(runner):
    waiting = await filled(runner)
    assert len(waiting) == 2 and all(w.alive for w in waiting)
    first = await runner.sh("echo secret > /tmp/left; sleep 30 & echo $$")
    assert first.exit_code == 0
    assert waiting[0].proc.returncode is not None  # that one ran the command and is gone
    second = await runner.sh("cat /tmp/left; ls /proc | grep -c '^[0-9]'")
    # A fresh /tmp and a pid namespace of its own: nothing of the first command survives.
    assert "No such file" in runner.data(second)["stderr"]
    assert runner.data(second)["stdout"].strip() in {"2", "3", "4"}  # bwrap init, sh, ls/grep


async def test_a_warm_sandbox_keeps_the_commands_folder_env_stdin_and_text(runner):
    (runner.workspace / "sub dir").mkdir()
    await filled(runner)
    reply = await runner.sh(
        "pwd; echo \"$GREETING\"; cat; printf 'tail\\n\\n'",
        workdir="sub dir",
        env={"GREETING": 'it\'s "quoted" $HOME `x`'},
    )
    data = runner.data(reply)
    assert data["stdout"] == '/workspace/sub dir\nit\'s "quoted" $HOME `x`\ntail\n\n'
    assert data["exit_code"] == 0
    clean = await runner.sh('echo "[${j-unset}] $0 $#"')
    assert runner.data(clean)["stdout"] == "[unset] /bin/sh 0\n"  # as `sh -c` starts
    multi = await runner.sh("if true\nthen\n  exit 7\nfi\n")
    assert multi.exit_code == 7
    syntax = await runner.sh("if")
    assert syntax.exit_code == 2 and "Syntax error" in runner.data(syntax)["stderr"]


async def test_a_variable_name_that_is_not_a_shell_name_never_becomes_shell_code(runner):
    # exec refuses such names; the sandbox keeps them out of a warm job's text all the same.
    from tool_runner.sandbox.base import ExecSpec

    sandbox = runner.core.sandbox
    await filled(runner)
    outcome = await sandbox.run(
        ExecSpec(command="echo ran", env={"X=1; touch /workspace/pwned #": "v"})
    )
    assert not (runner.workspace / "pwned").exists()
    assert outcome.stdout.text() in {"ran\n", ""}  # cold: bwrap takes or refuses the name


async def test_a_long_command_reaches_a_warm_sandbox_whole(runner):
    await filled(runner)
    payload = "x" * 120_000  # past a pipe's 64 KiB buffer
    reply = await runner.sh(f"v={payload}; echo ${{#v}}")
    assert runner.data(reply)["stdout"] == "120000\n"


async def test_lowered_limits_start_cold_with_those_limits(runner):
    await filled(runner)
    processes = "grep 'Max processes' /proc/self/limits | tr -s ' ' | cut -d' ' -f3"
    reply = await runner.sh(processes, limits={"max_processes": 20})
    assert runner.data(reply)["stdout"].strip() == "20"
    # The pool now keeps sandboxes for the last limits asked for, and applies them.
    await filled(runner)
    again = await runner.sh(processes, limits={"max_processes": 20})
    assert runner.data(again)["stdout"].strip() == "20"
    default = await runner.sh(processes)
    assert runner.data(default)["stdout"].strip() == "256"


async def test_a_dead_warm_sandbox_is_skipped_and_the_command_still_runs(runner):
    for warm in await filled(runner):
        kill_group(warm.proc.pid)
        await warm.proc.wait()
    reply = await runner.sh("echo still here")
    assert runner.data(reply)["stdout"] == "still here\n"


async def test_the_timeout_counts_from_the_command_not_the_sandboxs_start(workspace, data_dir):
    service, channel, runner = await start_runner(workspace, data_dir, default_timeout=1.0)
    try:
        await filled(runner)
        await asyncio.sleep(1.2)  # longer than the timeout, spent waiting warm
        quick = await runner.sh("sleep 0.3; echo done")
        assert runner.data(quick)["stdout"] == "done\n" and not runner.data(quick)["timed_out"]
        slow = await runner.sh("sleep 5")
        assert runner.data(slow)["timed_out"]
    finally:
        await stop_runner(service, channel, runner)


async def test_no_warm_sandboxes_when_turned_off(workspace, data_dir):
    service, channel, runner = await start_runner(workspace, data_dir, warm_sandboxes=0)
    try:
        assert await filled(runner) == []
        reply = await runner.sh("echo cold")
        assert runner.data(reply)["stdout"] == "cold\n"
        assert runner.core.sandbox.pool.ready == []
    finally:
        await stop_runner(service, channel, runner)
