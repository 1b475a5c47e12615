"""The images `make images` built: slim, and the tool-runner's need for systempaths=unconfined."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.compose.stack import SERVICES

pytestmark = pytest.mark.compose


def test_without_systempaths_unconfined_bubblewrap_cannot_start(
    docker_client: Any, images: list[str]
):
    """Why the tool-runner needs the option (README): without it the service refuses to start."""
    workspace = Path(tempfile.mkdtemp(prefix="crayfish-compose-ws-", dir="/tmp"))
    output = docker_client.containers.run(
        "crayfish-tool-runner:latest",
        user="10001:10001",
        read_only=True,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges:true", "seccomp=unconfined", "apparmor=unconfined"],
        network_mode="none",
        tmpfs={"/tmp": "size=16m"},
        volumes={str(workspace): {"bind": "/workspace", "mode": "rw"}},
        stderr=True,
        remove=False,
        detach=True,
    )
    try:
        assert output.wait(timeout=60)["StatusCode"] == 2
        assert "Can't mount proc on /newroot/proc" in output.logs().decode()
    finally:
        output.remove(force=True)
        shutil.rmtree(workspace, ignore_errors=True)


# The base's own ensurepip wheels (python3 -m venv needs them) are the base's, not ours.
SLIM = r"""
for tool in pip pip3 gcc cc make git; do command -v "$tool" >/dev/null && echo "tool: $tool"; done
ls /opt/venv/lib/python3.11/site-packages | grep -i -e '^pip' -e '^setuptools' -e '^crayfish.*tests'
find / -xdev \( -name '*.whl' -o -name .cache -o -path '*/crayfish*/tests' \) \
  ! -path /usr/share/python-wheels/\* ! -path \*/ensurepip/\* 2>/dev/null
ls -d /src /wheels 2>/dev/null
true
"""


@pytest.mark.parametrize("service", SERVICES)
def test_the_images_are_slim(docker_client: Any, images: list[str], service: str):
    """No pip, no compilers, no wheelhouse or sources, no caches, none of our tests."""
    output = docker_client.containers.run(
        f"crayfish-{service}:latest",
        entrypoint=["sh", "-c", SLIM],
        network_mode="none",
        remove=True,
    )
    assert output.decode().split() == [], output.decode()
