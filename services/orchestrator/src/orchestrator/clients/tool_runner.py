"""The tool-runner's client: its tools with streamed output, sandbox sessions, sandbox details."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from crayfish.tool_runner.v1 import tool_runner_pb2, tool_runner_pb2_grpc
from crayfish_common.tools import ToolResult

from orchestrator.clients.errors import raising_typed_errors
from orchestrator.clients.tool_service import (
    OutputSink,
    ToolServiceClient,
    run_tool_request,
    tool_result,
)

GRPC_SERVICE = "crayfish.tool_runner.v1.ToolRunnerService"


@dataclass(frozen=True)
class SandboxInfo:
    """The sandbox commands run in: its backend and what it warns about."""

    backend: str
    insecure: bool
    warnings: list[str] = field(default_factory=list)


class ToolRunnerClient(ToolServiceClient):
    def __init__(self, address: str, rpc_timeout: float, name: str = "tool-runner"):
        super().__init__(name, address, GRPC_SERVICE, rpc_timeout)
        self._stub = tool_runner_pb2_grpc.ToolRunnerServiceStub(self.channel)

    async def run_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        session_id: str,
        call_id: str,
        deadline: float,
        on_output: OutputSink | None = None,
    ) -> ToolResult:
        """Runs one call; with on_output, its output is streamed there as it comes."""
        if on_output is None:
            return await super().run_tool(
                name, arguments, session_id=session_id, call_id=call_id, deadline=deadline
            )
        request = run_tool_request(name, arguments, session_id, call_id)
        result = None
        with raising_typed_errors(self.name):
            async for event in self._stub.RunToolStream(request, timeout=deadline):
                if event.HasField("chunk"):
                    text = event.chunk.data.decode("utf-8", errors="replace")
                    await on_output(event.chunk.stream, text)
                elif event.HasField("result"):
                    result = tool_result(event.result)
        return result or ToolResult(ok=False, output="Error: the tool gave no result.")

    async def close_session(self, session_id: str) -> None:
        """Releases the session's sandbox (with docker: its container); idempotent."""
        request = tool_runner_pb2.CloseSessionRequest(session_id=session_id)
        with raising_typed_errors(self.name):
            await self._stub.CloseSession(request, timeout=self.rpc_timeout)

    async def describe_sandbox(self) -> SandboxInfo:
        request = tool_runner_pb2.DescribeSandboxRequest()
        with raising_typed_errors(self.name):
            reply = await self._stub.DescribeSandbox(request, timeout=self.rpc_timeout)
        return SandboxInfo(reply.backend, reply.insecure, list(reply.warnings))
