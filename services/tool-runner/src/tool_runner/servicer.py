"""gRPC ToolRunnerService: translates requests to the ToolRunnerCore and back, sets status codes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc
from crayfish.tool_runner.v1 import tool_runner_pb2, tool_runner_pb2_grpc
from crayfish_common.tool_service import ToolServicerMixin, run_tool_response
from crayfish_common.tools import CallContext, ToolSet

from tool_runner.core import ToolRunnerCore
from tool_runner.sandbox.base import sandbox_env

SERVICE_NAME = "crayfish.tool_runner.v1.ToolRunnerService"


class ToolRunnerServicer(ToolServicerMixin, tool_runner_pb2_grpc.ToolRunnerServiceServicer):
    """Tool failures are results (ok=false); only a malformed request is an RPC error."""

    def __init__(self, core: ToolRunnerCore):
        self.core = core

    async def tool_set(self, context: grpc.aio.ServicerContext) -> ToolSet:
        return self.core.tools

    async def RunTool(self, request, context):
        if not request.name:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "name is required")
        return await super().RunTool(request, context)

    async def RunToolStream(self, request, context) -> AsyncIterator[tool_runner_pb2.RunToolEvent]:
        if not request.name:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "name is required")
        queue: asyncio.Queue[tool_runner_pb2.RunToolEvent | None] = asyncio.Queue(maxsize=64)

        async def sink(stream: str, data: bytes) -> None:
            chunk = tool_runner_pb2.OutputChunk(stream=stream, data=data)
            await queue.put(tool_runner_pb2.RunToolEvent(chunk=chunk))

        async def work() -> None:
            call = CallContext(session_id=request.session_id, call_id=request.call_id, sink=sink)
            try:
                result = await self.core.run(request.name, request.arguments_json, call)
                await queue.put(tool_runner_pb2.RunToolEvent(result=run_tool_response(result)))
            finally:
                await queue.put(None)

        task = asyncio.ensure_future(work())
        try:
            while (event := await queue.get()) is not None:
                yield event
        finally:
            # The client went away: cancelling kills the command's whole process tree.
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def CloseSession(self, request, context):
        await self.core.close_session(request.session_id)
        return tool_runner_pb2.CloseSessionResponse()

    async def WatchProcesses(self, request, context) -> AsyncIterator[tool_runner_pb2.ProcessEnd]:
        async for record, tail in self.core.process_ends():
            yield tool_runner_pb2.ProcessEnd(
                process_id=record.id,
                session_id=record.session_id,
                status=record.status,
                exit_code=record.exit_code if record.exit_code is not None else -1,
                reason=record.reason,
                command=record.command,
                output_tail=tail,
            )

    async def KillProcesses(self, request, context):
        if not request.session_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "session_id is required")
        until = request.started_before or float("inf")
        killed = await self.core.processes.kill_started(
            request.session_id, request.started_after, until
        )
        return tool_runner_pb2.KillProcessesResponse(killed=killed)

    async def DescribeSandbox(self, request, context):
        box, secrets = self.core.sandbox, self.core.secrets
        secrets.refresh()
        bound = [
            tool_runner_pb2.SkillSecret(name=name, skills=skills)
            for name, skills in sorted(secrets.bound().items())
        ]
        return tool_runner_pb2.DescribeSandboxResponse(
            backend=box.name,
            insecure=box.insecure,
            warnings=list(box.warnings) + ([secrets.fault] if secrets.fault else []),
            available_bins=list(box.available_bins),
            workspace_path=box.workspace_path,
            skill_roots=dict(box.skill_roots),
            env_names=sorted(set(sandbox_env({})) | set(secrets.for_every_command())),
            skill_secrets=bound,
            secrets_fault=secrets.fault,
        )
