"""MEMORY_BACKEND=pgvector end to end: settings from the environment, the real gRPC servicer,
vectors in the test PostgreSQL (tests/postgres.py); and the eval on pgvector."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import grpc
import psycopg
import pytest
from crayfish.common.v1 import tools_pb2
from crayfish.memory.v1 import memory_pb2, memory_pb2_grpc
from memory import eval as memory_eval
from memory.backends.pgvector_backend import SCHEMA
from memory.server import build

DATASET = Path(__file__).parent / "data" / "mini"


def tables(url: str, prefix: str) -> dict[str, int]:
    """The backend's tables whose name starts with `prefix`, with their row counts."""
    with psycopg.connect(url, autocommit=True) as conn:
        names = conn.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = %s AND table_name LIKE %s",
            [SCHEMA, prefix + "%"],
        ).fetchall()
        return {
            name: conn.execute(f'SELECT count(*) FROM "{SCHEMA}"."{name}"').fetchone()[0]
            for (name,) in names
        }


@pytest.fixture
def pgvector_env(monkeypatch, memory_database_url) -> str:
    """MEMORY_BACKEND / MEMORY_DATABASE_URL as compose sets them; a prefix of the test's own."""
    prefix = f"e2e_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("MEMORY_BACKEND", "pgvector")
    monkeypatch.setenv("MEMORY_DATABASE_URL", memory_database_url)
    monkeypatch.setenv("MEMORY_COLLECTION_PREFIX", prefix)
    return prefix


async def test_the_service_on_pgvector_searches_writes_and_cites(
    pgvector_env, memory_database_url, make_settings, embedder, workspace
):
    service, core = build(make_settings(), embedder)
    port = await service.start("127.0.0.1:0")
    core.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stub = memory_pb2_grpc.MemoryServiceStub(channel)
    try:
        reply = await stub.SearchMemory(
            memory_pb2.SearchMemoryRequest(query="what kind of dog does the user have?"),
            timeout=60,
        )
        top = reply.hits[0]
        assert top.path == "MEMORY.md" and "Biscuit" in top.snippet
        assert top.start_line <= 4 <= top.end_line
        assert top.citation == f"MEMORY.md#L{top.start_line}-L{top.end_line}"
        dense = await stub.SearchMemory(
            memory_pb2.SearchMemoryRequest(query="Postgres migration billing", strategy="dense")
        )
        assert dense.hits[0].path == "memory/2026-05-01.md"

        arguments = json.dumps({"text": "The boiler was serviced by Nordheat on Friday."})
        wrote = await stub.RunTool(
            tools_pb2.RunToolRequest(name="memory_write", arguments_json=arguments)
        )
        assert wrote.ok, wrote.output
        path = json.loads(wrote.result_json)["citation"].split("#")[0]
        found = await stub.RunTool(
            tools_pb2.RunToolRequest(
                name="memory_search",
                arguments_json=json.dumps({"query": "who serviced the boiler?"}),
            )
        )
        hit = json.loads(found.result_json)["hits"][0]
        assert hit["path"] == path and f"Source: {path}#L" in found.output
        assert "Nordheat" in (workspace / path).read_text()

        stats = await stub.GetMemoryStats(memory_pb2.GetMemoryStatsRequest())
        assert stats.backend == "pgvector" and stats.dimension == 384
        # The vectors live in PostgreSQL, one row per chunk, in the backend's own schema.
        assert tables(memory_database_url, pgvector_env) == {f"{pgvector_env}_minilm": stats.chunks}
    finally:
        await channel.close()
        await service.stop(0)
        await core.stop()


def test_the_eval_runs_on_pgvector_and_drops_its_table(
    memory_database_url, embedder, capsys, monkeypatch
):
    monkeypatch.setattr(memory_eval, "load_embedder", lambda name, **_: embedder)
    monkeypatch.setenv("MEMORY_DATABASE_URL", memory_database_url)
    argv = ["--dataset", str(DATASET), "--backend", "pgvector", "--strategy", "dense,hybrid"]
    assert memory_eval.main([*argv, "--json"]) == 0
    output = json.loads(capsys.readouterr().out)
    assert output["skipped"] == []
    dense, hybrid = output["runs"]
    assert dense["backend"] == hybrid["backend"] == "pgvector"
    assert dense["queries"] == 10 and hybrid["recall@6"] >= 0.9
    assert tables(memory_database_url, "crayfish_eval_") == {}
