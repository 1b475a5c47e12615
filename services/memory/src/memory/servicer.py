"""gRPC MemoryService: translates protos to the domain façade and sets status codes."""

from __future__ import annotations

import asyncio

import grpc
from crayfish.memory.v1 import memory_pb2, memory_pb2_grpc
from crayfish_common.tool_service import ToolServicerMixin
from crayfish_common.tools import ToolSet

from memory.core import MemoryCore
from memory.history import Revision, RevisionNotFound
from memory.notes import MemoryPathError
from memory.tools import memory_tools

SERVICE_NAME = "crayfish.memory.v1.MemoryService"


class MemoryServicer(ToolServicerMixin, memory_pb2_grpc.MemoryServiceServicer):
    """Every RPC waits for the index to open; searches also wait for the first sync."""

    def __init__(self, core: MemoryCore) -> None:
        self.core = core
        self.tools = memory_tools(core)

    async def _core(self, context: grpc.aio.ServicerContext) -> MemoryCore:
        try:
            await self.core.wait_open()
        except (RuntimeError, TimeoutError) as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        return self.core

    async def tool_set(self, context: grpc.aio.ServicerContext) -> ToolSet:
        await self._core(context)
        return self.tools

    async def SearchMemory(self, request, context):
        core = await self._core(context)
        min_score = request.min_score if request.HasField("min_score") else None
        try:
            hits = await asyncio.to_thread(
                core.search,
                request.query,
                top_k=request.top_k or None,
                min_score=min_score,
                path_prefix=request.path_prefix,
                strategy=request.strategy,
                snippet_chars=request.snippet_chars or None,
            )
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except TimeoutError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        return memory_pb2.SearchMemoryResponse(
            hits=[
                memory_pb2.MemoryHit(
                    path=h.path,
                    start_line=h.start_line,
                    end_line=h.end_line,
                    score=h.score,
                    snippet=h.snippet,
                    citation=h.citation,
                    source=h.source,
                )
                for h in hits
            ],
            strategy=request.strategy or core.defaults.strategy,
        )

    async def GetMemory(self, request, context):
        core = await self._core(context)
        try:
            got = await asyncio.to_thread(
                core.get, request.path, request.start_line, request.line_count
            )
        except MemoryPathError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except FileNotFoundError as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        return memory_pb2.GetMemoryResponse(
            path=got.path,
            text=got.text,
            start_line=got.start_line,
            end_line=got.end_line,
            total_lines=got.total_lines,
        )

    async def WriteMemory(self, request, context):
        core = await self._core(context)
        try:
            written = await asyncio.to_thread(
                core.write, request.text, request.path, "api", request.reason
            )
        except (ValueError, MemoryPathError) as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except FileNotFoundError as exc:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        return memory_pb2.WriteMemoryResponse(
            path=written.path,
            start_line=written.start_line,
            end_line=written.end_line,
            citation=written.citation,
        )

    async def DeleteMemory(self, request, context):
        core = await self._core(context)
        try:
            removed, deleted = await asyncio.to_thread(core.delete, request.path)
        except MemoryPathError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except FileNotFoundError as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        return memory_pb2.DeleteMemoryResponse(chunks_removed=removed, file_deleted=deleted)

    async def SyncMemory(self, request, context):
        core = await self._core(context)
        report = await asyncio.to_thread(core.sync, request.force)
        return memory_pb2.SyncMemoryResponse(
            files_indexed=report.files_indexed,
            files_unchanged=report.files_unchanged,
            files_removed=report.files_removed,
            chunks_indexed=report.chunks_indexed,
            duration_ms=report.duration_ms,
            skipped=report.skipped,
        )

    async def GetMemoryStats(self, request, context):
        core = await self._core(context)
        stats = await asyncio.to_thread(core.stats)
        return memory_pb2.GetMemoryStatsResponse(
            files=stats.files,
            chunks=stats.chunks,
            backend=stats.backend,
            model=stats.model,
            dimension=stats.dimension,
            default_strategy=stats.default_strategy,
            skipped=stats.skipped,
        )

    async def ListMemoryHistory(self, request, context):
        core = await self._core(context)
        revisions = await asyncio.to_thread(core.history, request.limit or 50, request.path)
        return memory_pb2.ListMemoryHistoryResponse(revisions=[_revision(r) for r in revisions])

    async def GetMemoryRevision(self, request, context):
        core = await self._core(context)
        try:
            shown = await asyncio.to_thread(core.revision, request.rev)
        except RevisionNotFound as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return memory_pb2.GetMemoryRevisionResponse(
            revision=_revision(shown.revision), diff=shown.diff
        )

    async def RestoreMemory(self, request, context):
        core = await self._core(context)
        try:
            done = await asyncio.to_thread(
                core.restore, request.rev, "api", request.reason, request.path
            )
        except RevisionNotFound as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        except (ValueError, MemoryPathError) as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        reply = memory_pb2.RestoreMemoryResponse(restored=done.source, files=done.files)
        if done.revision is not None:
            reply.revision.CopyFrom(_revision(done.revision))
        return reply


def _revision(revision: Revision) -> memory_pb2.MemoryRevision:
    return memory_pb2.MemoryRevision(
        rev=revision.rev,
        time=revision.time,
        author=revision.author,
        reason=revision.reason,
        files=revision.files,
    )
