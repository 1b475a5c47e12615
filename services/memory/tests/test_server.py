"""The memory service over real gRPC: health, tools, search with citations, write/get/delete."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from crayfish.common.v1 import tools_pb2
from crayfish.memory.v1 import memory_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from memory.server import build
from memory.servicer import SERVICE_NAME


async def test_health_answers_before_the_index_is_built(make_settings, embedder):
    service, core = build(make_settings(), embedder)
    port = await service.start("127.0.0.1:0")
    core.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=5
        )
    await service.stop(0)
    await core.stop()
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_first_search_waits_for_the_first_sync(memory_stub):
    # The fixture starts the sync in the background; this search races it and must still find.
    reply = await memory_stub.SearchMemory(
        memory_pb2.SearchMemoryRequest(query="what kind of dog does the user have?"), timeout=60
    )
    assert reply.hits, "a search during start-up must wait for the index, not answer empty"
    top = reply.hits[0]
    assert top.path == "MEMORY.md"
    assert top.start_line <= 4 <= top.end_line
    assert top.citation == f"MEMORY.md#L{top.start_line}-L{top.end_line}"
    assert "Biscuit" in top.snippet
    assert 0.0 < top.score <= 1.0
    assert top.source == "memory"


@pytest.mark.parametrize("strategy", ["dense", "keyword", "hybrid"])
async def test_each_strategy_finds_the_migration_note(memory_stub, strategy):
    reply = await memory_stub.SearchMemory(
        memory_pb2.SearchMemoryRequest(query="Postgres migration billing", strategy=strategy)
    )
    assert reply.strategy == strategy
    assert reply.hits[0].path == "memory/2026-05-01.md"


async def test_path_prefix_and_snippet_cap(memory_stub):
    reply = await memory_stub.SearchMemory(
        memory_pb2.SearchMemoryRequest(
            query="tomatoes basil", path_prefix="memory/projects/", snippet_chars=60
        )
    )
    assert reply.hits and all(h.path.startswith("memory/projects/") for h in reply.hits)
    assert all(len(h.snippet) <= 60 for h in reply.hits)


async def test_min_score_gives_an_honest_empty_result(memory_stub):
    reply = await memory_stub.SearchMemory(
        memory_pb2.SearchMemoryRequest(query="quantum chromodynamics lecture", min_score=0.9)
    )
    assert list(reply.hits) == []


async def test_unknown_strategy_is_invalid_argument(memory_stub):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await memory_stub.SearchMemory(memory_pb2.SearchMemoryRequest(query="x", strategy="magic"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_list_tools_advertises_four_tools_with_schemas(memory_stub):
    reply = await memory_stub.ListTools(tools_pb2.ListToolsRequest())
    names = {t.name: t for t in reply.tools}
    assert set(names) == {"memory_search", "memory_get", "memory_write", "memory_edit"}
    for tool in reply.tools:
        schema = json.loads(tool.parameters_json)
        assert schema["type"] == "object" and schema["required"]
        assert tool.description and "\n" not in tool.description


async def run(stub, name: str, args: object) -> tools_pb2.RunToolResponse:
    raw = args if isinstance(args, str) else json.dumps(args)
    return await stub.RunTool(tools_pb2.RunToolRequest(name=name, arguments_json=raw))


async def test_memory_write_then_search_cites_the_new_note(memory_stub, workspace: Path):
    wrote = await run(memory_stub, "memory_write", {"text": "The wifi password is hunter2."})
    assert wrote.ok, wrote.output
    citation = json.loads(wrote.result_json)["citation"]
    assert citation.startswith("memory/") and citation in wrote.output
    path = citation.split("#")[0]
    assert "hunter2" in (workspace / path).read_text()
    line = json.loads(wrote.result_json)["start_line"]
    found = await run(memory_stub, "memory_search", {"query": "wifi password"})
    top = json.loads(found.result_json)["hits"][0]
    assert found.ok and top["path"] == path and top["start_line"] <= line <= top["end_line"]
    assert f"Source: {top['citation']}" in found.output and "hunter2" in found.output


async def test_memory_get_reads_lines(memory_stub):
    got = await run(
        memory_stub,
        "memory_get",
        {"path": "memory/2026-05-02.md", "start_line": 3, "line_count": 1},
    )
    assert got.ok
    assert "Lisbon" in got.output and "passport" not in got.output


async def test_tool_failures_are_readable_results(memory_stub):
    bad_json = await run(memory_stub, "memory_search", "{not json")
    outside = await run(memory_stub, "memory_get", {"path": "../etc/passwd"})
    missing = await run(memory_stub, "memory_get", {"path": "memory/nope.md"})
    unknown = await run(memory_stub, "memory_forget", {})
    no_query = await run(memory_stub, "memory_search", {})
    blank = await run(memory_stub, "memory_search", {"query": "   "})
    for reply in (bad_json, outside, missing, unknown, no_query, blank):
        assert not reply.ok and reply.output == f"Error: {reply.error}"
    assert "JSON" in bad_json.output and "memory_search" in unknown.output
    assert "is not a memory path (MEMORY.md or memory/...)" in outside.output
    assert "memory/nope.md" in missing.output
    assert "'query' is a required property" in no_query.output
    assert "say what to look for" in blank.output


async def test_no_match_is_said_plainly(memory_stub):
    reply = await run(memory_stub, "memory_search", {"query": "zebra xylophone"})
    # Keyword finds nothing; dense similarity to the unrelated notes is low but non-zero, and
    # stays under the service's min score, so the model is told plainly there is nothing.
    assert reply.ok and reply.output == "No matches in memory for 'zebra xylophone'."
    assert json.loads(reply.result_json) == {"hits": []}


async def test_delete_removes_file_and_hits(memory_stub, workspace: Path):
    request = memory_pb2.DeleteMemoryRequest(path="memory/2026-05-02.md")
    reply = await memory_stub.DeleteMemory(request)
    assert reply.chunks_removed >= 1 and reply.file_deleted
    assert not (workspace / "memory/2026-05-02.md").exists()
    found = await memory_stub.SearchMemory(
        memory_pb2.SearchMemoryRequest(query="Lisbon trip tickets", strategy="keyword")
    )
    assert all(h.path != "memory/2026-05-02.md" for h in found.hits)


async def test_sync_and_stats(memory_stub, workspace: Path):
    await memory_stub.SearchMemory(memory_pb2.SearchMemoryRequest(query="tea"))
    (workspace / "memory/2026-05-03.md").write_text("# 2026-05-03\n\nCalled the plumber.\n")
    (workspace / "memory/projects/garden.md").unlink()
    sync = await memory_stub.SyncMemory(memory_pb2.SyncMemoryRequest())
    assert (sync.files_indexed, sync.files_removed, sync.files_unchanged) == (1, 1, 3)
    stats = await memory_stub.GetMemoryStats(memory_pb2.GetMemoryStatsRequest())
    assert stats.files == 4 and stats.chunks >= 4
    assert stats.backend == "qdrant-edge" and stats.dimension == 384
    assert "MiniLM" in stats.model
