"""Secrets reach commands (all, or a skill's), never a result or a stream; edits apply at once."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from crayfish.common.v1 import tools_pb2
from crayfish.tool_runner.v1 import tool_runner_pb2

from .conftest import Runner, host_processes, start_docker_runner, start_runner, stop_runner

TOKEN = "ghp_Secret0123456789abcdefXYZ"
NPM = "npm_0123456789abcdefghij"


@pytest.fixture
def secrets_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="crayfish-secrets-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def write_secrets(folder: Path, text: str, mode: int = 0o600) -> Path:
    path = folder / "secrets.env"
    temporary = folder / "secrets.env.new"
    temporary.write_text(text)
    temporary.chmod(mode)
    os.replace(temporary, path)  # as an editor saves: a new file in one step
    return path


@pytest.fixture
async def secret_runner(
    workspace: Path, data_dir: Path, secrets_dir: Path
) -> AsyncIterator[Runner]:
    """A bwrap tool-runner with NPM_TOKEN for every command, GITHUB_TOKEN for the github skill."""
    path = write_secrets(secrets_dir, f"NPM_TOKEN={NPM}\nGITHUB_TOKEN[github]={TOKEN}\n")
    service, channel, client = await start_runner(workspace, data_dir, secrets_file=path)
    yield client
    await stop_runner(service, channel, client)


async def test_every_command_gets_an_unbound_secret_and_never_shows_it(secret_runner: Runner):
    reply = await secret_runner.sh(f'test "$NPM_TOKEN" = {NPM[:4]}"{NPM[4:]}" && echo "$NPM_TOKEN"')
    assert reply.exit_code == 0, reply.output  # the command had the value
    assert "stdout:\n[secret NPM_TOKEN]" in reply.output
    assert NPM not in reply.output and NPM not in reply.result_json
    assert secret_runner.data(reply)["stdout"] == "[secret NPM_TOKEN]\n"


async def test_a_bound_secret_reaches_only_commands_run_for_its_skill(secret_runner: Runner):
    show = 'echo "${GITHUB_TOKEN:-unset}"'
    assert "stdout:\nunset" in (await secret_runner.sh(show)).output
    assert "stdout:\nunset" in (await secret_runner.sh(show, skill="weather")).output
    for_github = await secret_runner.sh(show, skill="github")
    assert "stdout:\n[secret GITHUB_TOKEN]" in for_github.output
    checked = await secret_runner.sh(f'test "$GITHUB_TOKEN" = "{TOKEN}"', skill="github")
    assert checked.exit_code == 0


async def test_encoded_and_split_values_are_redacted_and_what_is_not(secret_runner: Runner):
    forms = {
        "base64": 'printf %s "$GITHUB_TOKEN" | base64',
        "base64 of a line": 'echo "$GITHUB_TOKEN" | base64',
        "base64 inside a longer text": 'printf "token=%s\\n" "$GITHUB_TOKEN" | base64 -w 0',
        "folded": 'printf %s "$GITHUB_TOKEN" | fold -w 5',
        "hex": 'printf %s "$GITHUB_TOKEN" | od -An -tx1 | tr -d " \\n"',
        "CRLF lines": 'printf %s "$GITHUB_TOKEN" | fold -w 9 | sed "s/$/\\r/"',
    }
    for what, command in forms.items():
        reply = await secret_runner.sh(command, skill="github")
        assert "[secret GITHUB_TOKEN]" in reply.output, (what, reply.output)
    # Not recognised (said in the README): a reversed value, a piece of one.
    reversed_ = await secret_runner.sh('printf %s "$GITHUB_TOKEN" | rev', skill="github")
    assert TOKEN[::-1] in reversed_.output
    piece = await secret_runner.sh('printf %s "$GITHUB_TOKEN" | cut -c1-10', skill="github")
    assert TOKEN[:10] in piece.output


async def test_a_piece_of_a_value_at_the_output_cut_is_redacted(secret_runner: Runner):
    # Kept: the first and last 10 bytes; the cut falls inside the value at both ends.
    reply = await secret_runner.sh(
        'printf "xx%s-%syy" "$NPM_TOKEN" "$NPM_TOKEN"', limits={"output_limit": 20}
    )
    assert "[output truncated" in reply.output
    assert NPM[:8] not in reply.output and NPM[-8:] not in reply.output, reply.output
    assert "xx[secret NPM_TOKEN, cut]" in reply.output
    assert "[secret NPM_TOKEN, cut]yy" in reply.output


async def test_streamed_output_is_redacted_even_when_a_value_spans_chunks(secret_runner: Runner):
    # The halves are printed 0.5 s apart: the sandbox sends them as two chunks (0.1 s batches).
    command = (
        f'printf "before %s" "${{NPM_TOKEN%{NPM[12:]}}}"; sleep 0.5; '
        f'printf "%s after\\n" "{NPM[12:]}"'
    )
    request = tools_pb2.RunToolRequest(
        name="exec", arguments_json=json.dumps({"command": command}), session_id="s1"
    )
    events = [event async for event in secret_runner.stub.RunToolStream(request)]
    streamed = b"".join(e.chunk.data for e in events if e.WhichOneof("event") == "chunk")
    assert streamed == b"before [secret NPM_TOKEN] after\n"
    assert "before [secret NPM_TOKEN] after" in events[-1].result.output


async def test_file_tools_redact_what_a_command_wrote(secret_runner: Runner):
    await secret_runner.sh('echo "token: $NPM_TOKEN" > notes.txt; touch "$NPM_TOKEN"')
    assert NPM in (secret_runner.workspace / "notes.txt").read_text()  # the file holds it
    read = await secret_runner.run("read_file", path="notes.txt")
    assert "token: [secret NPM_TOKEN]" in read.output and NPM not in read.output
    listed = await secret_runner.run("list_dir", path=".")
    assert "[secret NPM_TOKEN]" in listed.output and NPM not in listed.output


async def test_a_call_cannot_replace_a_secret(secret_runner: Runner):
    reply = await secret_runner.sh("true", env={"NPM_TOKEN": "mine"})
    assert not reply.ok and "comes from the secrets file" in reply.output


async def test_describe_sandbox_names_secrets_never_values(secret_runner: Runner):
    reply = await secret_runner.stub.DescribeSandbox(tool_runner_pb2.DescribeSandboxRequest())
    assert "NPM_TOKEN" in reply.env_names and "GITHUB_TOKEN" not in reply.env_names
    assert [(s.name, list(s.skills)) for s in reply.skill_secrets] == [("GITHUB_TOKEN", ["github"])]
    assert NPM not in str(reply) and TOKEN not in str(reply)


async def test_an_edit_takes_effect_without_a_restart(secret_runner: Runner, secrets_dir: Path):
    new = "npm_NewValue9876543210zz"
    write_secrets(secrets_dir, f"NPM_TOKEN={new}\n")
    reply = await secret_runner.sh(f'test "$NPM_TOKEN" = "{new}" && echo "$NPM_TOKEN {NPM}"')
    assert reply.exit_code == 0, reply.output
    # The removed value stays redacted: a command may have copied it into the workspace.
    assert "[secret NPM_TOKEN] [secret NPM_TOKEN]" in reply.output
    # A broken edit: commands keep the last valid version; DescribeSandbox says why.
    write_secrets(secrets_dir, f"NPM_TOKEN={new}\n", mode=0o644)
    kept = await secret_runner.sh(f'test "$NPM_TOKEN" = "{new}"')
    assert kept.exit_code == 0
    described = await secret_runner.stub.DescribeSandbox(tool_runner_pb2.DescribeSandboxRequest())
    assert (
        "mode 0644" in described.secrets_fault and "last valid version" in described.secrets_fault
    )
    assert any("mode 0644" in warning for warning in described.warnings)


async def test_a_value_is_never_on_a_host_command_line(
    workspace: Path, data_dir: Path, secrets_dir: Path
):
    # Cold starts only (warm sandboxes get their variables through stdin anyway).
    path = write_secrets(secrets_dir, f"NPM_TOKEN={NPM}\n")
    service, channel, runner = await start_runner(
        workspace, data_dir, secrets_file=path, warm_sandboxes=0
    )
    try:
        mark = "2.4242"
        running = asyncio.ensure_future(runner.sh(f"sleep {mark}"))
        for _ in range(100):
            if host_processes(mark):
                break
            await asyncio.sleep(0.05)
        assert host_processes(mark), "the command should be running"
        assert host_processes(NPM) == []
        assert (await running).exit_code == 0
    finally:
        await stop_runner(service, channel, runner)


@pytest.mark.docker
async def test_the_docker_backend_gets_secrets_and_redacts_them(
    workspace: Path, data_dir: Path, secrets_dir: Path, docker_engine: Any
):
    path = write_secrets(secrets_dir, f"NPM_TOKEN={NPM}\nGITHUB_TOKEN[github]={TOKEN}\n")
    service, channel, runner = await start_docker_runner(
        workspace, data_dir, docker_engine, secrets_file=path
    )
    try:
        show = 'echo "${GITHUB_TOKEN:-unset} $NPM_TOKEN"'
        assert "stdout:\nunset [secret NPM_TOKEN]" in (await runner.sh(show)).output
        checked = await runner.sh(f'test "$GITHUB_TOKEN" = "{TOKEN}" && {show}', skill="github")
        assert "stdout:\n[secret GITHUB_TOKEN] [secret NPM_TOKEN]" in checked.output
    finally:
        await stop_runner(service, channel, runner)
