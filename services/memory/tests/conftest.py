"""Fixtures: the real embedding model (loaded once per session), workspaces, a live gRPC server."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from crayfish.memory.v1 import memory_pb2_grpc
from memory.config import MemorySettings
from memory.embedder import Embedder, load_embedder
from memory.server import build

NOTES = {
    "MEMORY.md": "# Long-term memory\n\n"
    "- The user prefers green tea over coffee.\n"
    "- The user's dog is a border collie named Biscuit.\n"
    "- Deploys happen on Tuesdays after the standup.\n",
    "memory/2026-05-01.md": "# 2026-05-01\n\n"
    "Met Alice about migrating the billing database from MySQL to Postgres.\n"
    "Decision: keep the old replica running until June.\n",
    "memory/2026-05-02.md": "# 2026-05-02\n\n"
    "Bought tickets for the Lisbon trip in September.\n"
    "Todo: renew the passport before August.\n",
    "memory/projects/garden.md": "# Garden\n\n"
    "Planted tomatoes and basil on the balcony.\n"
    "The basil needs watering every second day.\n",
}


def write_notes(root: Path, notes: dict[str, str] = NOTES) -> Path:
    for rel, text in notes.items():
        file = root / rel
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return load_embedder("minilm")


@pytest.fixture(scope="session")
def memory_database_url() -> str:
    """A fresh database on the session's PostgreSQL (tests/postgres.py), already holding the
    orchestrator's tables, as when pgvector shares the orchestrator's database."""
    from tests.postgres import fresh_database

    return fresh_database()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return write_notes(tmp_path / "workspace")


@pytest.fixture
def make_settings(tmp_path: Path, workspace: Path) -> Callable[..., MemorySettings]:
    def make(**overrides: object) -> MemorySettings:
        values: dict[str, object] = {
            "host": "127.0.0.1",
            "port": 0,
            "workspace": workspace,
            "data_dir": tmp_path / "data",
            "watch": False,
        }
        values.update(overrides)
        return MemorySettings(**values)  # type: ignore[arg-type]

    return make


@pytest.fixture
async def memory_stub(
    make_settings: Callable[..., MemorySettings], embedder: Embedder
) -> AsyncIterator[memory_pb2_grpc.MemoryServiceStub]:
    """A real gRPC server on a free loopback port, serving the test workspace."""
    service, core = build(make_settings(), embedder)
    port = await service.start("127.0.0.1:0")
    core.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield memory_pb2_grpc.MemoryServiceStub(channel)
    finally:
        await channel.close()
        await service.stop(0)
        await core.stop()
