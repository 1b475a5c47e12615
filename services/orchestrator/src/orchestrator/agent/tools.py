"""The tools offered to the model: collected from the tool services, validated, run by their
clients; every failure becomes a result the model can read."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import jsonschema
from crayfish_common.tools import ToolResult

from orchestrator.agent.tool_owners import RefusedTool, ToolOwners
from orchestrator.clients import (
    DeadlineExceeded,
    OutputSink,
    ServiceError,
    ToolServiceClient,
    ToolSpec,
)
from orchestrator.clients.single_flight import SingleFlight

log = logging.getLogger(__name__)

# The orchestrator's own tools (agent/tool_search.py): a service's tool of the same name is not
# offered.
SEARCH_TOOLS = ("tool_search", "tool_describe")


@dataclass(frozen=True)
class OfferedTool:
    """A tool as offered to the model, with the service that runs it."""

    name: str
    description: str
    parameters: dict[str, Any]
    # None for the orchestrator's own tools (tool_search, tool_describe).
    service: ToolServiceClient | None

    @property
    def service_name(self) -> str:
        return self.service.name if self.service is not None else "orchestrator"

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
    """Tools by name, refreshed from the services; a dead service only loses its own tools.

    A name belongs to its first owner for the life of the process (agent/tool_owners.py): the
    built-in services' names from the start, any other name to the first service that lists it
    (built-in, then connectors, then CRAYFISH_TOOL_SERVICES in order when several list it
    together). Another service's offer of the name is refused (logged once, in `refused`),
    whether or not the owner is up.
    Past `search_threshold` tools (0: never), a turn offers the tools of `always_offered`
    services plus tool_search/tool_describe instead of every schema (agent/tool_search.py).
    """

    def __init__(
        self,
        services: list[ToolServiceClient],
        tool_timeout: float,
        ttl: float = 5.0,
        search_threshold: int = 0,
        always_offered: frozenset[str] = frozenset(),
    ):
        self.services = services
        self.tool_timeout = tool_timeout
        self.ttl = ttl
        self.search_threshold = search_threshold
        self.always_offered = always_offered
        self.tools: dict[str, OfferedTool] = {}
        self.unavailable: dict[str, str] = {}
        self.refused: list[RefusedTool] = []
        self.not_offered: dict[str, str] = {}  # tool name -> why its service holds it back
        self.owners = ToolOwners(s.name for s in services)
        self._fetched_at = 0.0
        self._shared_fetch = SingleFlight(self._fetch)

    async def refresh(self, force: bool = False) -> dict[str, OfferedTool]:
        # A service that was down is asked again at once: its tools are back when it is.
        fresh = time.monotonic() - self._fetched_at < self.ttl
        if not force and self.tools and not self.unavailable and fresh:
            return self.tools
        if force:
            return await self._fetch()
        return await self._shared_fetch()  # turns that start together ask the services once

    async def _fetch(self) -> dict[str, OfferedTool]:
        tools: dict[str, OfferedTool] = {}
        unavailable: dict[str, str] = {}
        refused: list[RefusedTool] = []
        not_offered: dict[str, str] = {}
        listed = await asyncio.gather(*(_listing(s) for s in self.services))
        for service, specs in zip(self.services, listed, strict=True):
            if isinstance(specs, ServiceError):
                unavailable[service.name] = f"{specs.status}: {specs.reason}"
                log.warning("no tools from %s: %s", service.name, unavailable[service.name])
                continue
            # The orchestrator's own tools (cast in) hold nothing back and have no such field.
            # Only a name's owner (or anyone, for a name nobody owns) may explain its absence.
            for name, reason in getattr(service, "not_offered", {}).items():
                if self.owners.owner_of(name) in (None, service.name):
                    not_offered.setdefault(name, reason)
            for spec in specs:
                refusal = self.owners.claim(spec.name, service.name)
                if refusal is not None:
                    refused.append(refusal)
                elif spec.name not in tools:  # a service listing one name twice: the first
                    tools[spec.name] = OfferedTool(
                        spec.name, spec.description, spec.parameters, service
                    )
        self.tools, self.unavailable, self.refused = tools, unavailable, refused
        self.not_offered = {n: r for n, r in not_offered.items() if n not in tools}
        self._fetched_at = time.monotonic()
        return tools

    @property
    def searching(self) -> bool:
        """Whether turns offer the search pair instead of every tool."""
        return 0 < self.search_threshold < len(self.tools)

    def deferred(self, tool: OfferedTool) -> bool:
        """A tool the model gets only once tool_search or tool_describe found it (or it
        called it by name)."""
        return self.searching and tool.service_name not in self.always_offered

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
            owner = self.owners.owner_of(name) or ""
            if owner in self.unavailable:
                return ToolResult(
                    False,
                    f"Error: `{name}` is a tool of the {owner} service, which is unavailable "
                    f"now ({self.unavailable[owner]}); try it again later.",
                )
            if name in self.not_offered:
                return ToolResult(
                    False, f"Error: `{name}` is not offered: {self.not_offered[name].rstrip('.')}."
                )
            known = ", ".join(sorted(self.tools)) or "none"
            down = "".join(f" The {s} service is unavailable now." for s in self.unavailable)
            message = f"Error: unknown tool `{name}`. Available tools: {known}.{down}"
            return ToolResult(False, message)
        arguments, problem = check_arguments(raw_arguments, tool.parameters)
        if problem:
            return ToolResult(False, f"Error: invalid arguments for `{name}`: {problem}")
        if tool.service is None:  # the orchestrator's own tools run in TurnTools
            return ToolResult(False, f"Error: `{name}` is not available here.")
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


async def _listing(service: ToolServiceClient) -> list[ToolSpec] | ServiceError:
    try:
        return await service.list_tools()
    except ServiceError as exc:
        return exc


def check_arguments(raw: str, schema: dict[str, Any]) -> tuple[dict[str, Any], str]:
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
    validator = _validator(schema)
    error = None
    if validator is not None:
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "arguments"
        return {}, f"{where}: {error.message}"
    return arguments, ""


# Validators by the schema object they check: jsonschema.validate() checks the schema itself
# against its meta-schema on every call (~4 ms of a tool call's CPU); a tool's schema does not
# change while it is offered. The schema is kept with its validator, so an id is never reused.
_validators: dict[int, tuple[dict[str, Any], jsonschema.protocols.Validator | None]] = {}


def _validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator | None:
    """The schema's validator, made once; None (validation skipped) for an invalid schema."""
    known = _validators.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
        validator: jsonschema.protocols.Validator | None = cls(schema)
    except jsonschema.SchemaError:
        log.warning("tool schema is invalid; skipping validation")
        validator = None
    if len(_validators) > 1024:  # schemas of tools no longer offered
        _validators.clear()
    _validators[id(schema)] = (schema, validator)
    return validator
