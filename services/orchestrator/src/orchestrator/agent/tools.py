"""The tools offered to the model: collected from the services, validated, run over gRPC."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import jsonschema
from crayfish.common.v1 import tools_pb2

from orchestrator.clients import ServiceClients

log = logging.getLogger(__name__)

TOOL_SERVICES = ("tool-runner", "memory", "skills")
OutputCallback = Callable[[str, str], Awaitable[None]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    service: str

    def as_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass
class ToolOutcome:
    ok: bool
    output: str
    exit_code: int = 0
    duration_ms: float = 0.0
    truncated: bool = False


class ToolRegistry:
    """Tools by name, refreshed from the services; a dead service only loses its own tools."""

    def __init__(self, clients: ServiceClients, tool_timeout: float, ttl: float = 5.0):
        self.clients = clients
        self.tool_timeout = tool_timeout
        self.ttl = ttl
        self.tools: dict[str, Tool] = {}
        self.unavailable: dict[str, str] = {}
        self._fetched_at = 0.0

    async def refresh(self, force: bool = False) -> dict[str, Tool]:
        # A service that was down is asked again at once: its tools are back when it is.
        fresh = time.monotonic() - self._fetched_at < self.ttl
        if not force and self.tools and not self.unavailable and fresh:
            return self.tools
        tools: dict[str, Tool] = {}
        unavailable: dict[str, str] = {}
        for service in TOOL_SERVICES:
            try:
                specs = await self.clients.list_tools(service)
            except grpc.RpcError as exc:
                unavailable[service] = f"{exc.code().name}: {exc.details()}"
                log.warning("no tools from %s: %s", service, unavailable[service])
                continue
            for spec in specs:
                tools[spec.name] = Tool(
                    spec.name, spec.description, _schema(spec.parameters_json), service
                )
        self.tools, self.unavailable = tools, unavailable
        self._fetched_at = time.monotonic()
        return tools

    async def run(
        self,
        name: str,
        raw_arguments: str,
        session_id: str,
        call_id: str,
        on_output: OutputCallback | None = None,
    ) -> ToolOutcome:
        """Runs a call; tool-runner output is streamed to on_output as it arrives."""
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            down = "".join(f" The {s} service is unavailable now." for s in self.unavailable)
            message = f"Error: unknown tool `{name}`. Available tools: {known}.{down}"
            return ToolOutcome(False, message)
        arguments, problem = parse_arguments(raw_arguments, tool.parameters)
        if problem:
            return ToolOutcome(False, f"Error: invalid arguments for `{name}`: {problem}")
        request = tools_pb2.RunToolRequest(
            name=name,
            arguments_json=json.dumps(arguments, ensure_ascii=False),
            session_id=session_id,
            call_id=call_id,
        )
        try:
            if on_output is not None and tool.service == "tool-runner":
                reply = await self._stream(request, on_output)
            else:
                reply = await self.clients.run_tool(tool.service, request, self.tool_timeout)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                return ToolOutcome(False, f"Error: `{name}` timed out after {self.tool_timeout}s.")
            return ToolOutcome(
                False, f"Error: the {tool.service} service failed: {exc.code().name}"
            )
        output = reply.output if reply.ok else (reply.output or f"Error: {reply.error}")
        return ToolOutcome(reply.ok, output, reply.exit_code, reply.duration_ms, reply.truncated)

    async def _stream(
        self, request: tools_pb2.RunToolRequest, on_output: OutputCallback
    ) -> tools_pb2.RunToolResponse:
        result = None
        async for event in self.clients.run_tool_stream(request, self.tool_timeout):
            if event.HasField("chunk"):
                text = event.chunk.data.decode("utf-8", errors="replace")
                await on_output(event.chunk.stream, text)
            elif event.HasField("result"):
                result = event.result
        if result is None:
            return tools_pb2.RunToolResponse(ok=False, output="Error: the tool gave no result.")
        return result


def parse_arguments(raw: str, schema: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """(arguments, "") when raw is a JSON object valid against schema; else ({}, the problem)."""
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not valid JSON ({exc.msg} at char {exc.pos})"
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        return {}, f"arguments are not usable JSON ({exc})"
    except RecursionError:
        return {}, "arguments are nested too deeply"
    if not isinstance(arguments, dict):
        return {}, "arguments must be a JSON object"
    try:  # a lone surrogate (\ud800) parses, but cannot be sent on as UTF-8
        json.dumps(arguments, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return {}, f"arguments hold text that is not valid Unicode ({exc.reason})"
    try:
        jsonschema.validate(arguments, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "arguments"
        return {}, f"{where}: {exc.message}"
    except jsonschema.SchemaError:
        log.warning("tool schema is invalid; skipping validation")
    return arguments, ""


def _schema(text: str) -> dict[str, Any]:
    try:
        schema = json.loads(text) if text else {}
    except ValueError:
        schema = {}
    return schema if isinstance(schema, dict) and schema else {"type": "object"}
