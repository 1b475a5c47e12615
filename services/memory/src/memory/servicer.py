"""gRPC MemoryService: translates protos to the domain service and sets status codes."""

from __future__ import annotations

import asyncio
import json
import time

import grpc
from crayfish.common.v1 import tools_pb2
from crayfish.memory.v1 import memory_pb2, memory_pb2_grpc

from memory.files import MemoryPathError
from memory.runtime import MemoryRuntime
from memory.service import MemoryService
from memory.tools import TOOLS, run_tool

SERVICE_NAME = "crayfish.memory.v1.MemoryService"


class MemoryServicer(memory_pb2_grpc.MemoryServiceServicer):
    """Every RPC waits for the index to open; searches also wait for the first sync."""

    def __init__(self, runtime: MemoryRuntime) -> None:
        self.runtime = runtime

    async def _service(self, context: grpc.aio.ServicerContext) -> MemoryService:
        try:
            return await self.runtime.get()
        except (RuntimeError, TimeoutError) as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
            raise  # unreachable: abort raises

    async def ListTools(self, request, context):
        specs = [
            tools_pb2.ToolSpec(
                name=t.name, description=t.description, parameters_json=json.dumps(t.parameters)
            )
            for t in TOOLS
        ]
        return tools_pb2.ListToolsResponse(tools=specs)

    async def RunTool(self, request, context):
        started = time.perf_counter()
        service = await self._service(context)
        result = await asyncio.to_thread(run_tool, service, request.name, request.arguments_json)
        return tools_pb2.RunToolResponse(
            ok=result.ok,
            output=result.output,
            result_json=json.dumps(result.result),
            error=result.error,
            duration_ms=(time.perf_counter() - started) * 1000,
        )

    async def SearchMemory(self, request, context):
        service = await self._service(context)
        min_score = request.min_score if request.HasField("min_score") else None
        try:
            hits = await asyncio.to_thread(
                service.search,
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
            strategy=request.strategy or service.defaults.strategy,
        )

    async def GetMemory(self, request, context):
        service = await self._service(context)
        try:
            got = await asyncio.to_thread(
                service.get, request.path, request.start_line, request.line_count
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
        service = await self._service(context)
        try:
            written = await asyncio.to_thread(service.write, request.text, request.path)
        except (ValueError, MemoryPathError) as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return memory_pb2.WriteMemoryResponse(
            path=written.path,
            start_line=written.start_line,
            end_line=written.end_line,
            citation=written.citation,
        )

    async def DeleteMemory(self, request, context):
        service = await self._service(context)
        try:
            removed, deleted = await asyncio.to_thread(service.delete, request.path)
        except MemoryPathError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except FileNotFoundError as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        return memory_pb2.DeleteMemoryResponse(chunks_removed=removed, file_deleted=deleted)

    async def SyncMemory(self, request, context):
        service = await self._service(context)
        report = await asyncio.to_thread(service.sync, request.force)
        return memory_pb2.SyncMemoryResponse(
            files_indexed=report.files_indexed,
            files_unchanged=report.files_unchanged,
            files_removed=report.files_removed,
            chunks_indexed=report.chunks_indexed,
            duration_ms=report.duration_ms,
            skipped=report.skipped,
        )

    async def GetMemoryStats(self, request, context):
        service = await self._service(context)
        stats = await asyncio.to_thread(service.stats)
        return memory_pb2.GetMemoryStatsResponse(
            files=stats.files,
            chunks=stats.chunks,
            backend=stats.backend,
            model=stats.model,
            dimension=stats.dimension,
            default_strategy=stats.default_strategy,
            skipped=stats.skipped,
        )
