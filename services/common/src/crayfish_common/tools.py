"""The tool contract every tool service implements (crayfish.common.v1 ListTools / RunTool).

A tool declares a name, a one-line description, a JSON schema of its arguments and an async
handler. A `ToolSet` parses and validates the arguments (jsonschema) and turns every failure into
a result the model can read: a tool call never raises out of `ToolSet.run`.
"""

from __future__ import annotations

import json
import logging
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import jsonschema

log = logging.getLogger(__name__)

MAX_PROBLEM_CHARS = 300
# Streams a tool's output as it happens: (stream name, bytes), e.g. ("stdout", b"...").
ChunkSink = Callable[[str, bytes], Awaitable[None]]


class ToolError(Exception):
    """A failure the model should read as the tool's result (bad input, a refused path, ...)."""


@dataclass
class ToolResult:
    """ok=False means the tool could not do what was asked; `output` then says why.

    A command that ran and exited non-zero is ok=True with its `exit_code`.
    """

    ok: bool
    output: str
    data: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    exit_code: int = 0
    duration_ms: float = 0.0
    truncated: bool = False

    @classmethod
    def failure(cls, message: str) -> ToolResult:
        return cls(ok=False, output=f"Error: {message}", error=message)


@dataclass(frozen=True)
class CallContext:
    """Who is calling: the session (sandboxes are per session), the call id, an output sink."""

    session_id: str = ""
    call_id: str = ""
    sink: ChunkSink | None = None


class Tool(ABC):
    """One tool: subclasses set the three class attributes and write `run`."""

    name: ClassVar[str]
    description: ClassVar[str]  # one line, shown to the model in the prompt's Tooling section
    parameters: ClassVar[dict[str, Any]]  # JSON schema of the arguments object

    @abstractmethod
    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        """Does the work; raise ToolError (or an expected error) with a reason to refuse."""


def object_schema(
    properties: dict[str, Any], required: Iterable[str] = (), additional: bool = False
) -> dict[str, Any]:
    """The JSON schema of an arguments object (closed unless `additional`)."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": additional,
    }


class ToolSet:
    """Tools by name; `run` validates, dispatches and never raises.

    `expected` are exception types whose message is a reason for the model (a domain's own
    "not found" or "bad path"); anything else is logged as a bug and reported as internal.
    """

    def __init__(self, tools: Iterable[Tool], expected: tuple[type[Exception], ...] = ()):
        self.tools = {tool.name: tool for tool in tools}
        self.expected: tuple[type[Exception], ...] = (ToolError, *expected)
        self._validators = {
            name: jsonschema.Draft202012Validator(tool.parameters)
            for name, tool in self.tools.items()
        }

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools.values())

    async def run(
        self, name: str, arguments_json: str, call: CallContext | None = None
    ) -> ToolResult:
        started = time.monotonic()
        try:
            result = await self._run(name, arguments_json, call or CallContext())
        except self.expected as exc:
            result = ToolResult.failure(str(exc))
        except Exception as exc:  # a bug must still reach the model as a result
            log.exception("tool %s failed", name)
            result = ToolResult.failure(f"internal error in {name}: {type(exc).__name__}: {exc}")
        if not result.duration_ms:
            result.duration_ms = (time.monotonic() - started) * 1000
        return result

    async def _run(self, name: str, arguments_json: str, call: CallContext) -> ToolResult:
        tool = self.tools.get(name)
        if tool is None:
            raise ToolError(f"unknown tool {name!r} (known: {', '.join(self.tools)})")
        args = normalize_arguments(parse_arguments(arguments_json), tool.parameters)
        problems = validation_problems(self._validators[name], args)
        if problems:
            raise ToolError(f"invalid arguments for {name}: " + "; ".join(problems))
        return await tool.run(args, call)


def parse_arguments(arguments_json: str) -> dict[str, Any]:
    """The arguments object; empty input means no arguments; ToolError with the reason."""
    if not arguments_json.strip():
        return {}
    try:
        value = json.loads(arguments_json)
    except json.JSONDecodeError as exc:
        raise ToolError(f"arguments are not valid JSON ({exc.msg} at position {exc.pos})") from exc
    except (ValueError, RecursionError) as exc:  # a 5,000-digit number, deep nesting
        raise ToolError(f"arguments are not usable JSON ({type(exc).__name__})") from exc
    if not isinstance(value, dict):
        raise ToolError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


def normalize_arguments(args: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """What models often mean: an optional argument sent as null is not given, and a number or
    boolean sent as a string ("3", "true") is that number or boolean. The rest is validated as is.
    """
    required = set(schema.get("required", ()))
    properties = schema.get("properties", {})
    normalized = {}
    for key, value in args.items():
        if value is None and key not in required:
            continue
        wanted = properties.get(key, {}).get("type") if isinstance(properties, dict) else None
        normalized[key] = _from_string(value, wanted) if isinstance(value, str) else value
    return normalized


def _from_string(value: str, wanted: Any) -> Any:
    types = set(wanted) if isinstance(wanted, list) else {wanted}
    if "string" in types:
        return value
    text = value.strip()
    if "integer" in types and re.fullmatch(r"-?\d{1,18}", text):
        return int(text)
    if "number" in types and re.fullmatch(r"-?\d{1,18}(\.\d{1,18})?", text):
        return float(text) if "." in text else int(text)
    if "boolean" in types and text.lower() in ("true", "false"):
        return text.lower() == "true"
    return value


def validation_problems(validator: jsonschema.protocols.Validator, args: Any) -> list[str]:
    """Every way `args` breaks the schema, each as 'where: what' (at most five)."""
    problems = []
    for error in sorted(validator.iter_errors(args), key=lambda e: list(e.path))[:5]:
        where = "/".join(str(part) for part in error.path) or "arguments"
        message = error.message  # quotes the offending value, which may be huge
        if len(message) > MAX_PROBLEM_CHARS:  # keep the head (the value) and the tail (the rule)
            message = message[: MAX_PROBLEM_CHARS // 2] + " [...] " + message[-100:]
        problems.append(f"{where}: {message}")
    return problems
