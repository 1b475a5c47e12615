"""Memory routes: search with citations, read lines, write a note, sync the index."""

from __future__ import annotations

from typing import Annotated

import grpc
from crayfish.memory.v1 import memory_pb2
from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from orchestrator.api.deps import get_runtime
from orchestrator.api.grpc_errors import api_error
from orchestrator.runtime import Runtime

router = APIRouter(tags=["memory"])
# The proto's line fields are int32; the line count (end - start + 1) must fit as well.
MAX_LINE = 2**31 - 2
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


class MemorySearch(BaseModel):
    query: str = Field(min_length=1, max_length=4000)
    top_k: int = Field(0, ge=0, le=100, description="0 = the service default (6)")
    min_score: float | None = Field(None, ge=0.0, le=1.0)
    path_prefix: str = ""
    strategy: str = Field("", description="dense, keyword or hybrid; empty = default")


class MemoryHit(BaseModel):
    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    citation: str
    source: str


class MemoryHits(BaseModel):
    hits: list[MemoryHit]
    strategy: str


class MemoryLines(BaseModel):
    path: str
    start_line: int
    end_line: int
    total_lines: int
    text: str


class MemoryNote(BaseModel):
    text: str = Field(min_length=1, max_length=100_000)
    path: str = Field("", description="under memory/; empty = memory/YYYY-MM-DD.md of today")


class MemoryWritten(BaseModel):
    path: str
    start_line: int
    end_line: int
    citation: str


class MemorySynced(BaseModel):
    files_indexed: int
    files_unchanged: int
    files_removed: int
    chunks_indexed: int
    duration_ms: float
    skipped: dict[str, str] = Field(
        default_factory=dict,
        description="Files left out (a link out of the workspace, a FIFO): path -> reason",
    )


def _timeout(runtime: Runtime) -> float:
    return runtime.settings.rpc_timeout * 6  # a search may wait for the first index sync


@router.post("/api/memory/search", response_model=MemoryHits)
async def search_memory(body: MemorySearch, runtime: RuntimeDep) -> MemoryHits:
    request = memory_pb2.SearchMemoryRequest(
        query=body.query,
        top_k=body.top_k,
        path_prefix=body.path_prefix,
        strategy=body.strategy,
    )
    if body.min_score is not None:
        request.min_score = body.min_score
    try:
        reply = await runtime.clients.memory.SearchMemory(request, timeout=_timeout(runtime))
    except grpc.RpcError as exc:
        raise api_error("memory", exc) from exc
    hits = [
        MemoryHit(
            path=h.path,
            start_line=h.start_line,
            end_line=h.end_line,
            score=h.score,
            snippet=h.snippet,
            citation=h.citation,
            source=h.source,
        )
        for h in reply.hits
    ]
    return MemoryHits(hits=hits, strategy=reply.strategy)


@router.get("/api/memory/file", response_model=MemoryLines)
async def read_memory_lines(
    runtime: RuntimeDep,
    path: Annotated[str, Query(min_length=1)],
    start_line: Annotated[int, Query(ge=0, le=MAX_LINE)] = 0,
    end_line: Annotated[int, Query(ge=0, le=MAX_LINE)] = 0,
) -> MemoryLines:
    """Lines of a memory file (what a citation `path#Lx-Ly` points at)."""
    count = max(0, end_line - start_line + 1) if end_line else 0
    request = memory_pb2.GetMemoryRequest(path=path, start_line=start_line, line_count=count)
    try:
        reply = await runtime.clients.memory.GetMemory(request, timeout=_timeout(runtime))
    except grpc.RpcError as exc:
        raise api_error("memory", exc) from exc
    return MemoryLines(
        path=reply.path,
        start_line=reply.start_line,
        end_line=reply.end_line,
        total_lines=reply.total_lines,
        text=reply.text,
    )


@router.post("/api/memory/notes", response_model=MemoryWritten, status_code=201)
async def write_memory(body: MemoryNote, runtime: RuntimeDep) -> MemoryWritten:
    """Appends a note and indexes it at once."""
    request = memory_pb2.WriteMemoryRequest(text=body.text, path=body.path)
    try:
        reply = await runtime.clients.memory.WriteMemory(request, timeout=_timeout(runtime))
    except grpc.RpcError as exc:
        raise api_error("memory", exc) from exc
    return MemoryWritten(
        path=reply.path,
        start_line=reply.start_line,
        end_line=reply.end_line,
        citation=reply.citation,
    )


@router.post("/api/memory/sync", response_model=MemorySynced)
async def sync_memory(runtime: RuntimeDep, force: bool = False) -> MemorySynced:
    """Brings the index up to date with the files now."""
    request = memory_pb2.SyncMemoryRequest(force=force)
    try:
        reply = await runtime.clients.memory.SyncMemory(request, timeout=_timeout(runtime) * 10)
    except grpc.RpcError as exc:
        raise api_error("memory", exc) from exc
    return MemorySynced(
        files_indexed=reply.files_indexed,
        files_unchanged=reply.files_unchanged,
        files_removed=reply.files_removed,
        chunks_indexed=reply.chunks_indexed,
        duration_ms=reply.duration_ms,
        skipped=dict(reply.skipped),
    )
