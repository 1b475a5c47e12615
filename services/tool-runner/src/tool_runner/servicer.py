"""gRPC servicer: translates ToolRunnerService requests to the ToolBox and back."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import grpc
from crayfish.common.v1 import tools_pb2
from crayfish.tool_runner.v1 import tool_runner_pb2, tool_runner_pb2_grpc

from tool_runner.result import ToolResult
from tool_runner.sandbox.base import sandbox_env
from tool_runner.tools import ToolBox

SERVICE_NAME = "crayfish.tool_runner.v1.ToolRunnerService"


def to_proto(result: ToolResult) -> tools_pb2.RunToolResponse:
    return tools_pb2.RunToolResponse(
        ok=result.ok,
        output=result.output,
        result_json=json.dumps(result.data, ensure_ascii=False),
        error=result.error,
        exit_code=result.exit_code,
        duration_ms=result.duration_ms,
        truncated=result.truncated,
    )


class ToolRunnerServicer(tool_runner_pb2_grpc.ToolRunnerServiceServicer):
    """Tool failures are results (ok=false); only a malformed request is an RPC error."""

    def __init__(self, toolbox: ToolBox):
        self.toolbox = toolbox

    async def ListTools(self, request, context):
        return tools_pb2.ListToolsResponse(
            tools=[
                tools_pb2.ToolSpec(
                    name=s.name, description=s.description, parameters_json=json.dumps(s.parameters)
                )
                for s in self.toolbox.specs.values()
            ]
        )

    async def RunTool(self, request, context):
        if not request.name:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "name is required")
        result = await self.toolbox.run(
            request.name, request.arguments_json, request.session_id, request.call_id
        )
        return to_proto(result)

    async def RunToolStream(self, request, context) -> AsyncIterator[tool_runner_pb2.RunToolEvent]:
        if not request.name:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "name is required")
        queue: asyncio.Queue[tool_runner_pb2.RunToolEvent | None] = asyncio.Queue(maxsize=64)

        async def sink(stream: str, data: bytes) -> None:
            chunk = tool_runner_pb2.OutputChunk(stream=stream, data=data)
            await queue.put(tool_runner_pb2.RunToolEvent(chunk=chunk))

        async def work() -> None:
            try:
                result = await self.toolbox.run(
                    request.name, request.arguments_json, request.session_id, request.call_id, sink
                )
                await queue.put(tool_runner_pb2.RunToolEvent(result=to_proto(result)))
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
        await self.toolbox.sandbox.close_session(request.session_id)
        return tool_runner_pb2.CloseSessionResponse()

    async def DescribeSandbox(self, request, context):
        box = self.toolbox.sandbox
        return tool_runner_pb2.DescribeSandboxResponse(
            backend=box.name,
            insecure=box.insecure,
            warnings=list(box.warnings),
            available_bins=list(box.available_bins),
            workspace_path=box.workspace_path,
            skill_roots=dict(box.skill_roots),
            env_names=sorted(sandbox_env({})),
        )
