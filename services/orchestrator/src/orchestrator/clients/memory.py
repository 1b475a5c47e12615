"""The memory service's client: search with citations, read lines, write a note, sync, history.

Its dataclasses are the orchestrator's one shape of each reply: the routes send them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from crayfish.memory.v1 import memory_pb2, memory_pb2_grpc
from pydantic import Field

from orchestrator.clients.errors import raising_typed_errors
from orchestrator.clients.tool_service import ToolServiceClient

GRPC_SERVICE = "crayfish.memory.v1.MemoryService"


@dataclass(frozen=True)
class MemoryHit:
    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    citation: str  # "path#Lx-Ly"
    source: str  # "memory" or "sessions"


@dataclass(frozen=True)
class SearchResult:
    hits: list[MemoryHit]
    strategy: str


@dataclass(frozen=True)
class FileLines:
    path: str
    start_line: int
    end_line: int
    total_lines: int
    text: str


@dataclass(frozen=True)
class NoteWritten:
    path: str
    start_line: int
    end_line: int
    citation: str


@dataclass(frozen=True)
class SyncReport:
    files_indexed: int
    files_unchanged: int
    files_removed: int
    chunks_indexed: int
    duration_ms: float
    skipped: Annotated[
        dict[str, str],
        Field(description="Files left out (a link out of the workspace, a FIFO): path -> reason"),
    ] = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryRevision:
    rev: str  # the git commit id
    time: str  # UTC, ISO 8601
    author: Annotated[str, Field(description="session:<id> (the model), api (REST) or hand")]
    reason: str
    files: list[str]


@dataclass(frozen=True)
class MemoryHistory:
    revisions: list[MemoryRevision]


@dataclass(frozen=True)
class MemoryRevisionDiff:
    rev: str
    time: str
    author: str
    reason: str
    files: list[str]
    diff: Annotated[str, Field(description="unified diff against the revision before it")]


@dataclass(frozen=True)
class MemoryRestored:
    restored: Annotated[str, Field(description="the full id of the revision restored")]
    revision: Annotated[
        MemoryRevision | None, Field(description="the new revision; null if nothing changed")
    ]
    files: list[str]


def _revision(r: memory_pb2.MemoryRevision) -> MemoryRevision:
    return MemoryRevision(r.rev, r.time, r.author, r.reason, list(r.files))


class MemoryClient(ToolServiceClient):
    """Each call takes a deadline in seconds; by default the client's RPC timeout."""

    def __init__(self, address: str, rpc_timeout: float, name: str = "memory"):
        super().__init__(name, address, GRPC_SERVICE, rpc_timeout)
        self._stub = memory_pb2_grpc.MemoryServiceStub(self.channel)

    async def search(
        self,
        query: str,
        *,
        top_k: int = 0,
        min_score: float | None = None,
        path_prefix: str = "",
        strategy: str = "",
        deadline: float | None = None,
    ) -> SearchResult:
        """Hits for the query; 0, None and "" leave the service's defaults."""
        request = memory_pb2.SearchMemoryRequest(
            query=query, top_k=top_k, path_prefix=path_prefix, strategy=strategy
        )
        if min_score is not None:
            request.min_score = min_score
        with raising_typed_errors(self.name):
            reply = await self._stub.SearchMemory(request, timeout=deadline or self.rpc_timeout)
        hits = [
            MemoryHit(h.path, h.start_line, h.end_line, h.score, h.snippet, h.citation, h.source)
            for h in reply.hits
        ]
        return SearchResult(hits, reply.strategy)

    async def read_lines(
        self, path: str, start_line: int = 0, line_count: int = 0, deadline: float | None = None
    ) -> FileLines:
        """Lines of a memory file (1-based; 0 from the start, a count of 0 to the end)."""
        request = memory_pb2.GetMemoryRequest(
            path=path, start_line=start_line, line_count=line_count
        )
        with raising_typed_errors(self.name):
            reply = await self._stub.GetMemory(request, timeout=deadline or self.rpc_timeout)
        return FileLines(
            reply.path, reply.start_line, reply.end_line, reply.total_lines, reply.text
        )

    async def write_note(
        self, text: str, path: str = "", deadline: float | None = None, reason: str = ""
    ) -> NoteWritten:
        """Appends a note (to today's memory/YYYY-MM-DD.md without a path) and indexes it."""
        request = memory_pb2.WriteMemoryRequest(text=text, path=path, reason=reason)
        with raising_typed_errors(self.name):
            reply = await self._stub.WriteMemory(request, timeout=deadline or self.rpc_timeout)
        return NoteWritten(reply.path, reply.start_line, reply.end_line, reply.citation)

    async def sync(self, force: bool = False, deadline: float | None = None) -> SyncReport:
        request = memory_pb2.SyncMemoryRequest(force=force)
        with raising_typed_errors(self.name):
            reply = await self._stub.SyncMemory(request, timeout=deadline or self.rpc_timeout)
        return SyncReport(
            reply.files_indexed,
            reply.files_unchanged,
            reply.files_removed,
            reply.chunks_indexed,
            reply.duration_ms,
            dict(reply.skipped),
        )

    async def history(
        self, limit: int = 50, path: str = "", deadline: float | None = None
    ) -> MemoryHistory:
        """Revisions of the memory files, newest first."""
        request = memory_pb2.ListMemoryHistoryRequest(limit=limit, path=path)
        with raising_typed_errors(self.name):
            reply = await self._stub.ListMemoryHistory(
                request, timeout=deadline or self.rpc_timeout
            )
        return MemoryHistory([_revision(r) for r in reply.revisions])

    async def revision(self, rev: str, deadline: float | None = None) -> MemoryRevisionDiff:
        """One revision and its diff."""
        request = memory_pb2.GetMemoryRevisionRequest(rev=rev)
        with raising_typed_errors(self.name):
            reply = await self._stub.GetMemoryRevision(
                request, timeout=deadline or self.rpc_timeout
            )
        r = reply.revision
        return MemoryRevisionDiff(r.rev, r.time, r.author, r.reason, list(r.files), reply.diff)

    async def restore(
        self, rev: str, reason: str = "", path: str = "", deadline: float | None = None
    ) -> MemoryRestored:
        """The files (or one, `path`) as they were at `rev`, as a new revision."""
        request = memory_pb2.RestoreMemoryRequest(rev=rev, reason=reason, path=path)
        with raising_typed_errors(self.name):
            reply = await self._stub.RestoreMemory(request, timeout=deadline or self.rpc_timeout)
        made = _revision(reply.revision) if reply.HasField("revision") else None
        return MemoryRestored(reply.restored, made, list(reply.files))
