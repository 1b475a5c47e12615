"""Deny patterns, allowlist mode and the audit line, through the real service."""

from __future__ import annotations

import logging

from tool_runner.config import DEFAULT_DENY
from tool_runner.policy import CommandPolicy, first_words

from .conftest import start_runner, stop_runner


def test_default_deny_patterns():
    policy = CommandPolicy(DEFAULT_DENY, [])
    for bad in [
        "rm -rf /",
        "sudo rm -fr / --no-preserve-root",
        ":(){ :|:& };:",
        "mkfs.ext4 x",
        "dd if=/dev/zero of=/dev/sda",
        "shutdown -h now",
    ]:
        assert policy.check(bad), bad
    for fine in ["rm -rf ./build", "ls /", "echo rebooted-ok > x.txt", "python3 app.py"]:
        assert policy.check(fine) is None, fine


def test_first_words_of_a_shell_line():
    line = "FOO=1 ls -la | grep x && /usr/bin/python3 -c 'a;b' ; $(curl x) `wget y`\nrm z"
    assert first_words(line) == ["ls", "grep", "python3", "curl", "wget", "rm"]


async def test_allowlist_mode_refuses_unlisted_programs(workspace, data_dir):
    service, channel, runner = await start_runner(
        workspace, data_dir, allowlist=["echo", "cat", "ls"]
    )
    try:
        fine = await runner.sh("echo hi | cat")
        assert fine.ok and "hi" in fine.output
        refused = await runner.sh("echo hi; python3 -c 'print(1)'")
        assert not refused.ok and "'python3' is not in the allowlist" in refused.output
    finally:
        await stop_runner(service, channel, runner)


async def test_one_audit_line_per_call_without_the_arguments(runner, caplog):
    caplog.set_level(logging.INFO, logger="tool_runner.audit")
    await runner.sh("echo top-secret-argument")
    await runner.run("read_file", path="missing.txt")
    lines = [r for r in caplog.records if r.name == "tool_runner.audit"]
    assert len(lines) == 2
    assert "tool=exec" in lines[0].getMessage() and "exit=0" in lines[0].getMessage()
    assert "ok=False" in lines[1].getMessage()
    assert all("top-secret-argument" not in r.getMessage() for r in lines)
    assert lines[0].fields["args_sha256"] and lines[0].fields["bytes"] > 0
