"""Fixtures: a temporary workspace and data folder, a skill writer, a real gRPC server."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from crayfish.skills.v1 import skills_pb2_grpc
from crayfish_common.channels import aio_channel
from skills.config import SkillsSettings
from skills.core import SkillsCore
from skills.server import start_service

SkillWriter = Callable[..., Path]


@pytest.fixture
def settings(tmp_path: Path) -> SkillsSettings:
    """Settings isolated from the environment: no tool-runner, temporary folders."""
    (tmp_path / "workspace" / "skills").mkdir(parents=True)
    return SkillsSettings(
        host="127.0.0.1",
        port=0,
        workspace=tmp_path / "workspace",
        data_dir=tmp_path / "data",
        tool_runner_addr="",
        watch_step_ms=30,
    )


def skill_text(name: str | None, description: str | None, extra: str = "", body: str = "") -> str:
    lines = ["---"]
    if name is not None:
        lines.append(f"name: {name}")
    if description is not None:
        lines.append(f"description: {description}")
    if extra:
        lines.append(textwrap.dedent(extra).strip("\n"))
    lines.append("---")
    return "\n".join(lines) + "\n" + (body or f"# {name}\n\nUse {name} well.\n")


@pytest.fixture
def write_skill() -> SkillWriter:
    """write_skill(root, folder, name=..., description=..., extra=yaml, body=..., raw=text)."""

    def write(
        root: Path,
        folder: str,
        name: str | None = "",
        description: str | None = "A test skill.",
        extra: str = "",
        body: str = "",
        raw: str | bytes | None = None,
    ) -> Path:
        path = root / folder / "SKILL.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        if raw is None:
            raw = skill_text(folder if name == "" else name, description, extra, body)
        if isinstance(raw, bytes):
            path.write_bytes(raw)
        else:
            path.write_text(raw, encoding="utf-8")
        return path

    return write


@dataclass
class Served:
    """A running skills server: a client stub, and its core (to see what the watcher did)."""

    stub: skills_pb2_grpc.SkillsServiceStub
    core: SkillsCore


@pytest.fixture
async def served(settings: SkillsSettings) -> AsyncIterator[Served]:
    """A real skills server on a free loopback port, a client stub for it, and its core."""
    service, core = await start_service(settings)
    channel = aio_channel(f"127.0.0.1:{service.port}")
    try:
        yield Served(skills_pb2_grpc.SkillsServiceStub(channel), core)
    finally:
        await channel.close()
        await service.stop(0)
        await core.stop()


@pytest.fixture
def stub(served: Served) -> skills_pb2_grpc.SkillsServiceStub:
    """A client stub for a real skills server on a free loopback port."""
    return served.stub
