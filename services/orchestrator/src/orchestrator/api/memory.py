"""Memory routes: search with citations, read lines, write a note, sync, history and restore."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from pydantic import Field

from orchestrator.api.deps import CoreDep
from orchestrator.api.schemas import RequestBody
from orchestrator.clients.memory import (
    FileLines,
    MemoryHistory,
    MemoryRestored,
    MemoryRevisionDiff,
    NoteWritten,
    SearchResult,
    SyncReport,
)
from orchestrator.core import OrchestratorCore

router = APIRouter(tags=["memory"])
# The proto's line fields are int32; the line count (end - start + 1) must fit as well.
MAX_LINE = 2**31 - 2


class MemorySearch(RequestBody):
    query: str = Field(min_length=1, max_length=4000)
    top_k: int = Field(0, ge=0, le=100, strict=True, description="0 = the service default (6)")
    # strict: JSON true is not a score (lax validation would read it as 1.0)
    min_score: float | None = Field(None, ge=0.0, le=1.0, strict=True)
    path_prefix: str = ""
    strategy: str = Field("", description="dense, keyword or hybrid; empty = default")


class MemoryNote(RequestBody):
    text: str = Field(min_length=1, max_length=100_000)
    path: str = Field(
        "",
        description="MEMORY.md, USER.md, SOUL.md or memory/...md; empty = memory/YYYY-MM-DD.md",
    )
    reason: str = Field("", max_length=2000, description="kept with the revision")


class MemoryRestore(RequestBody):
    rev: str = Field(min_length=4, max_length=40, pattern="^[0-9a-fA-F]+$")
    reason: str = Field("", max_length=2000, description="empty = 'restore ... as at <rev>'")
    path: str = Field("", max_length=1000, description="only this file; empty = all of them")


def _timeout(core: OrchestratorCore) -> float:
    return core.settings.rpc_timeout * 6  # a search may wait for the first index sync


@router.post("/api/memory/search", response_model=SearchResult)
async def search_memory(body: MemorySearch, core: CoreDep) -> SearchResult:
    return await core.search_memory(
        body.query,
        top_k=body.top_k,
        min_score=body.min_score,
        path_prefix=body.path_prefix,
        strategy=body.strategy,
        deadline=_timeout(core),
    )


@router.get("/api/memory/file", response_model=FileLines)
async def read_memory_lines(
    core: CoreDep,
    path: Annotated[str, Query(min_length=1)],
    start_line: Annotated[int, Query(ge=0, le=MAX_LINE)] = 0,
    end_line: Annotated[int, Query(ge=0, le=MAX_LINE)] = 0,
) -> FileLines:
    """Lines of a memory file (what a citation `path#Lx-Ly` points at)."""
    count = max(0, end_line - start_line + 1) if end_line else 0
    return await core.read_memory_lines(path, start_line, count, _timeout(core))


@router.post("/api/memory/notes", response_model=NoteWritten, status_code=201)
async def write_memory(body: MemoryNote, core: CoreDep) -> NoteWritten:
    """Appends a note and indexes it at once."""
    return await core.write_memory_note(body.text, body.path, _timeout(core), body.reason)


@router.post("/api/memory/sync", response_model=SyncReport)
async def sync_memory(core: CoreDep, force: bool = False) -> SyncReport:
    """Brings the index up to date with the files now."""
    return await core.sync_memory(force, _timeout(core) * 10)


@router.get("/api/memory/history", response_model=MemoryHistory)
async def memory_history(
    core: CoreDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    path: Annotated[str, Query(max_length=1000)] = "",
) -> MemoryHistory:
    """Revisions of MEMORY.md, USER.md, SOUL.md and memory/ (newest first; of one file)."""
    return await core.memory_history(limit, path)


@router.get("/api/memory/history/{rev}", response_model=MemoryRevisionDiff)
async def memory_revision(
    core: CoreDep, rev: Annotated[str, Path(pattern="^[0-9a-fA-F]{4,40}$")]
) -> MemoryRevisionDiff:
    """One revision and its unified diff (a unique prefix of 4+ hex digits will do)."""
    return await core.memory_revision(rev)


@router.post("/api/memory/restore", response_model=MemoryRestored)
async def restore_memory(body: MemoryRestore, core: CoreDep) -> MemoryRestored:
    """The memory files as they were at `rev`, as a new revision; the index follows."""
    return await core.restore_memory(body.rev, body.reason, body.path)
