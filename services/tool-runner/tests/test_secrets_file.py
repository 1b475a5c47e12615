"""The secrets file's format, and a bad file stopping start-up with one line naming the fault."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tool_runner.secrets import Secret, SecretsError, read_secrets

from devstack.launcher import free_port

TOKEN = "ghp_Secret0123456789abcdef"


def write(folder: Path, text: str, mode: int = 0o600) -> Path:
    path = folder / "secrets.env"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_lines_bindings_quotes_and_references(tmp_path: Path, workspace: Path):
    path = write(
        tmp_path,
        "# tokens for skills\n\n"
        f"GITHUB_TOKEN[github, gh-pr]={TOKEN}\n"
        "export NPM_TOKEN=${HOST_NPM}\n"
        'SPACED="two words here"\n'
        "LITERAL='keeps ${THIS} as it is'\n",
    )
    secrets = read_secrets(path, workspace, {"HOST_NPM": "npm_from_the_host"})
    assert secrets == [
        Secret("GITHUB_TOKEN", TOKEN, ("github", "gh-pr")),
        Secret("NPM_TOKEN", "npm_from_the_host"),
        Secret("SPACED", "two words here"),
        Secret("LITERAL", "keeps ${THIS} as it is"),
    ]


FAULTS = [
    # (file text, mode, what the error must say)
    (f"GITHUB_TOKEN {TOKEN}\n", 0o600, "line 1: expected NAME=value or NAME[skill,...]=value"),
    (f"GITHUB_TOKEN={TOKEN}\n", 0o644, "mode 0644; it must be 0600"),
    ("GITHUB_TOKEN=${GH_TOKEN}\n", 0o600, "GITHUB_TOKEN: ${GH_TOKEN} is not set"),
    (f"OPENAI_API_KEY={TOKEN}\n", 0o600, "OPENAI_API_KEY may not be a secret"),
    (f"PATH={TOKEN}\n", 0o600, "PATH may not be a secret: the sandbox sets it"),
    ("STOLEN=${CRAYFISH_API_TOKEN}\n", 0o600, "STOLEN: may not take ${CRAYFISH_API_TOKEN}"),
    ("PIN=1234\n", 0o600, "PIN: the value has 4 characters"),
    (f"A_TOKEN={TOKEN}\nA_TOKEN={TOKEN}\n", 0o600, "line 2: A_TOKEN is set twice"),
    (f"GITHUB_TOKEN[../up]={TOKEN}\n", 0o600, "GITHUB_TOKEN: '../up' is not a skill name"),
    ("QUOTED='never closed\n", 0o600, "QUOTED: the value's quote is not closed"),
]


@pytest.mark.parametrize(("text", "mode", "expected"), FAULTS)
def test_each_fault_names_the_file_and_the_variable(
    tmp_path: Path, workspace: Path, text: str, mode: int, expected: str
):
    path = write(tmp_path, text, mode)
    environ = {"CRAYFISH_API_TOKEN": "orchestrator-token-value"}
    with pytest.raises(SecretsError) as caught:
        read_secrets(path, workspace, environ)
    message = str(caught.value)
    assert message.startswith(f"CRAYFISH_SECRETS_FILE ({path})"), message
    assert expected in message, message
    assert TOKEN not in message and "orchestrator-token-value" not in message


def test_a_file_inside_the_workspace_is_refused(workspace: Path):
    path = write(workspace, f"GITHUB_TOKEN={TOKEN}\n")
    with pytest.raises(SecretsError, match="inside the workspace, where commands can read it"):
        read_secrets(path, workspace, {})


def test_a_link_through_the_workspace_is_refused(tmp_path: Path, workspace: Path):
    # /etc-like name -> workspace link (a command can re-point it) -> a file outside.
    real = write(tmp_path, f"GITHUB_TOKEN={TOKEN}\n")
    (workspace / "planted").symlink_to(real)
    named = tmp_path / "configured.env"
    named.symlink_to(workspace / "planted")
    with pytest.raises(SecretsError, match="inside the workspace"):
        read_secrets(named, workspace, {})
    direct = tmp_path / "direct.env"
    direct.symlink_to(real)  # a link outside the workspace (as Kubernetes mounts secrets) is fine
    assert read_secrets(direct, workspace, {}) == [Secret("GITHUB_TOKEN", TOKEN)]


def start(workspace: Path, data_dir: Path, secrets_file: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "TOOL_RUNNER_WORKSPACE": str(workspace),
        "TOOL_RUNNER_DATA_DIR": str(data_dir),
        "TOOL_RUNNER_PORT": str(free_port()),
        "CRAYFISH_SECRETS_FILE": str(secrets_file),
    }
    env.pop("GH_TOKEN", None)
    return subprocess.run(
        [sys.executable, "-m", "tool_runner"], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("text", "mode", "expected"),
    [
        ("GITHUB_TOKEN=${GH_TOKEN}\n", 0o600, "line 1: GITHUB_TOKEN: ${GH_TOKEN} is not set"),
        (f"GITHUB_TOKEN={TOKEN}\n", 0o644, "mode 0644; it must be 0600"),
        (f"TOOL_RUNNER_SANDBOX={TOKEN}\n", 0o600, "TOOL_RUNNER_SANDBOX may not be a secret"),
        (f"# tokens\nGITHUB_TOKEN: {TOKEN}\n", 0o600, "line 2: expected NAME=value"),
    ],
)
def test_a_bad_file_stops_the_service_with_one_line(
    tmp_path: Path, workspace: Path, data_dir: Path, text: str, mode: int, expected: str
):
    done = start(workspace, data_dir, write(tmp_path, text, mode))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert lines == [lines[0]] and lines[0].startswith("tool-runner: cannot start: "), lines
    assert "CRAYFISH_SECRETS_FILE" in lines[0] and expected in lines[0], lines[0]
    assert TOKEN not in done.stderr
