"""The tool-runner's client: its tools with streamed output, sandbox sessions, sandbox details."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from crayfish.tool_runner.v1 import tool_runner_pb2, tool_runner_pb2_grpc
from crayfish_common.tools import ToolResult

from orchestrator.clients.errors import raising_typed_errors
from orchestrator.clients.runner_ring import RunnerRing
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


@dataclass(frozen=True)
class ProcessEnd:
    """A background process that asked for a notice ended (or was lost with its runner)."""

    process_id: str
    session_id: str
    status: str
    exit_code: int
    reason: str
    command: str
    output_tail: str


class ToolRunnerClient(ToolServiceClient):
    """The tool-runner pool; with several runners, each session's calls go to one of them
    (clients/runner_ring.py), and what concerns a session everywhere goes to each."""

    def __init__(self, address: str, rpc_timeout: float, name: str = "tool-runner"):
        super().__init__(name, address, GRPC_SERVICE, rpc_timeout)
        self._stub = tool_runner_pb2_grpc.ToolRunnerServiceStub(self.channel)
        self.ring = RunnerRing(address)

    async def _session_stub(self, session_id: str) -> tool_runner_pb2_grpc.ToolRunnerServiceStub:
        channel = await self.ring.channel_for(session_id)
        if channel is None:
            return self._stub
        return tool_runner_pb2_grpc.ToolRunnerServiceStub(channel)

    async def _every_stub(self) -> list[tool_runner_pb2_grpc.ToolRunnerServiceStub]:
        channels = await self.ring.all_channels()
        return [tool_runner_pb2_grpc.ToolRunnerServiceStub(c) for c in channels] or [self._stub]

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
        """Runs one call on the session's runner; with on_output, its output is streamed
        there as it comes."""
        request = run_tool_request(name, arguments, session_id, call_id)
        stub = await self._session_stub(session_id)
        if on_output is None:
            with raising_typed_errors(self.name):
                return tool_result(await stub.RunTool(request, timeout=deadline))
        result = None
        with raising_typed_errors(self.name):
            async for event in stub.RunToolStream(request, timeout=deadline):
                if event.HasField("chunk"):
                    text = event.chunk.data.decode("utf-8", errors="replace")
                    await on_output(event.chunk.stream, text)
                elif event.HasField("result"):
                    result = tool_result(event.result)
        return result or ToolResult(ok=False, output="Error: the tool gave no result.")

    async def close_session(self, session_id: str) -> None:
        """Releases the session's sandbox and kills its background processes, on every
        runner (with docker: its container); idempotent."""
        request = tool_runner_pb2.CloseSessionRequest(session_id=session_id)
        with raising_typed_errors(self.name):
            for stub in await self._every_stub():
                await stub.CloseSession(request, timeout=self.rpc_timeout)

    async def kill_processes(self, session_id: str, since: float, until: float) -> int:
        """Kills the session's background processes started between the two times (unix
        seconds), on every runner: those of one turn. Returns how many were running."""
        request = tool_runner_pb2.KillProcessesRequest(
            session_id=session_id, started_after=since, started_before=until
        )
        killed = 0
        with raising_typed_errors(self.name):
            for stub in await self._every_stub():
                killed += (await stub.KillProcesses(request, timeout=self.rpc_timeout)).killed
        return killed

    async def process_ends(self, address: str) -> AsyncIterator[ProcessEnd]:
        """The ends one runner reports (WatchProcesses), until it goes away."""
        stub = tool_runner_pb2_grpc.ToolRunnerServiceStub(self.ring.channel(address))
        with raising_typed_errors(self.name):
            async for end in stub.WatchProcesses(tool_runner_pb2.WatchProcessesRequest()):
                yield ProcessEnd(
                    end.process_id,
                    end.session_id,
                    end.status,
                    end.exit_code,
                    end.reason,
                    end.command,
                    end.output_tail,
                )

    async def close(self) -> None:
        await self.ring.close()
        await super().close()

    async def describe_sandbox(self) -> SandboxInfo:
        request = tool_runner_pb2.DescribeSandboxRequest()
        with raising_typed_errors(self.name):
            reply = await self._stub.DescribeSandbox(request, timeout=self.rpc_timeout)
        return SandboxInfo(reply.backend, reply.insecure, list(reply.warnings))
