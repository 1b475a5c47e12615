"""The tools offered to the model: collected from the tool services, validated, run by their
clients; every failure becomes a result the model can read."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import jsonschema
from crayfish_common.tools import ToolResult

from orchestrator.clients import DeadlineExceeded, OutputSink, ServiceError, ToolServiceClient

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OfferedTool:
    """A tool as offered to the model, with the service that runs it."""

    name: str
    description: str
    parameters: dict[str, Any]
    service: ToolServiceClient

    def as_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class ToolRegistry:
    """Tools by name, refreshed from the services; a dead service only loses its own tools."""

    def __init__(self, services: list[ToolServiceClient], tool_timeout: float, ttl: float = 5.0):
        self.services = services
        self.tool_timeout = tool_timeout
        self.ttl = ttl
        self.tools: dict[str, OfferedTool] = {}
        self.unavailable: dict[str, str] = {}
        self._fetched_at = 0.0

    async def refresh(self, force: bool = False) -> dict[str, OfferedTool]:
        # A service that was down is asked again at once: its tools are back when it is.
        fresh = time.monotonic() - self._fetched_at < self.ttl
        if not force and self.tools and not self.unavailable and fresh:
            return self.tools
        tools: dict[str, OfferedTool] = {}
        unavailable: dict[str, str] = {}
        for service in self.services:
            try:
                specs = await service.list_tools()
            except ServiceError as exc:
                unavailable[service.name] = f"{exc.status}: {exc.reason}"
                log.warning("no tools from %s: %s", service.name, unavailable[service.name])
                continue
            for spec in specs:
                tools[spec.name] = OfferedTool(
                    spec.name, spec.description, spec.parameters, service
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
        on_output: OutputSink | None = None,
    ) -> ToolResult:
        """Runs a call; a service that streams output sends it to on_output as it arrives."""
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            down = "".join(f" The {s} service is unavailable now." for s in self.unavailable)
            message = f"Error: unknown tool `{name}`. Available tools: {known}.{down}"
            return ToolResult(False, message)
        arguments, problem = parse_arguments(raw_arguments, tool.parameters)
        if problem:
            return ToolResult(False, f"Error: invalid arguments for `{name}`: {problem}")
        try:
            result = await tool.service.run_tool(
                name,
                arguments,
                session_id=session_id,
                call_id=call_id,
                deadline=self.tool_timeout,
                on_output=on_output,
            )
        except DeadlineExceeded:
            return ToolResult(False, f"Error: `{name}` timed out after {self.tool_timeout}s.")
        except ServiceError as exc:
            return ToolResult(False, f"Error: the {exc.service} service failed: {exc.status}")
        if not result.ok and not result.output:
            result.output = f"Error: {result.error}"
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
