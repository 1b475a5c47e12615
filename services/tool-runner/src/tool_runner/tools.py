"""The tool catalogue: JSON schemas, one-line descriptions, and dispatch that never raises."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from tool_runner import files, spreadsheet
from tool_runner.audit import audit
from tool_runner.config import ToolRunnerSettings
from tool_runner.exec_tool import build_spec, run_exec
from tool_runner.fsafe import FileRefused, ToolError, Workspace
from tool_runner.policy import CommandPolicy
from tool_runner.result import ToolResult
from tool_runner.sandbox.base import ChunkSink, Sandbox
from tool_runner.schema import validate
from tool_runner.textcap import cap_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


def _obj(required: list[str], **props: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


LIMIT_NAMES = ["cpu_seconds", "memory_mb", "max_processes", "max_file_mb", "output_limit"]
_PATH = {"type": "string", "minLength": 1, "description": "Path relative to the workspace."}

SPECS = [
    ToolSpec(
        "exec",
        "Run a shell command in the sandboxed workspace (no network); returns exit "
        "code, stdout and stderr.",
        _obj(
            ["command"],
            command={"type": "string", "minLength": 1, "description": "sh -c command line."},
            workdir={"type": "string", "description": "Folder relative to the workspace."},
            timeout={"type": "number", "minimum": 0.1, "description": "Seconds."},
            env={
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Extra environment variables.",
            },
            limits={
                "type": "object",
                "description": "Optional lower limits for this call.",
                "properties": {k: {"type": "integer", "minimum": 1} for k in LIMIT_NAMES},
                "additionalProperties": False,
            },
        ),
    ),
    ToolSpec(
        "read_file",
        "Read a text file from the workspace, paged by lines (offset is 1-based).",
        _obj(
            ["path"],
            path=_PATH,
            offset={"type": "integer", "minimum": 1, "description": "First line (1-based)."},
            limit={"type": "integer", "minimum": 1, "description": "Lines to read."},
        ),
    ),
    ToolSpec(
        "write_file",
        "Create or overwrite a text file in the workspace (folders are created).",
        _obj(["path", "content"], path=_PATH, content={"type": "string"}),
    ),
    ToolSpec(
        "edit_file",
        "Replace one exact, unique occurrence of `old` with `new` in a workspace file.",
        _obj(
            ["path", "old", "new"],
            path=_PATH,
            old={"type": "string", "minLength": 1},
            new={"type": "string"},
        ),
    ),
    ToolSpec(
        "list_dir",
        "List a workspace folder (sizes, symlink targets), optionally recursively.",
        _obj(
            [],
            path={"type": "string", "description": "Folder; default the workspace."},
            depth={"type": "integer", "minimum": 1, "maximum": 10},
            ignore={
                "type": "array",
                "items": {"type": "string"},
                "description": "Name globs to skip.",
            },
        ),
    ),
    ToolSpec(
        "read_spreadsheet",
        "Read rows of an .xlsx sheet or a .csv file in the workspace as a table.",
        _obj(
            ["path"],
            path=_PATH,
            sheet={"type": "string"},
            header={"type": "boolean", "description": "First row is a header (default)."},
            start_row={"type": "integer", "minimum": 1},
            max_rows={"type": "integer", "minimum": 1, "maximum": 5000},
        ),
    ),
]


class ToolBox:
    """Runs tools by name for the servicer; every failure becomes an ok=False result."""

    def __init__(self, settings: ToolRunnerSettings, workspace: Workspace, sandbox: Sandbox):
        self.settings = settings
        self.ws = workspace
        self.sandbox = sandbox
        self.policy = CommandPolicy(settings.deny_patterns, settings.allowlist)
        self.specs = {spec.name: spec for spec in SPECS}

    async def run(
        self,
        name: str,
        arguments_json: str,
        session_id: str = "",
        call_id: str = "",
        sink: ChunkSink | None = None,
    ) -> ToolResult:
        started = time.monotonic()
        try:
            result = await self._run(name, arguments_json, session_id, sink)
        except (ToolError, FileRefused) as exc:
            result = ToolResult.failure(str(exc))
        except Exception as exc:  # a bug must still reach the model as a result
            log.exception("tool %s failed", name)
            result = ToolResult.failure(f"internal error in {name}: {type(exc).__name__}: {exc}")
        if not result.duration_ms:
            result.duration_ms = (time.monotonic() - started) * 1000
        result.output, cut = cap_text(result.output, self.settings.result_limit)
        result.truncated = result.truncated or cut
        audit(name, arguments_json, session_id, call_id, result)
        return result

    async def _run(
        self, name: str, arguments_json: str, session_id: str, sink: ChunkSink | None
    ) -> ToolResult:
        spec = self.specs.get(name)
        if spec is None:
            raise ToolError(f"unknown tool {name!r} (known: {', '.join(self.specs)})")
        args = parse_arguments(arguments_json)
        problems = validate(args, spec.parameters)
        if problems:
            raise ToolError(f"invalid arguments for {name}: " + "; ".join(problems))
        s = self.settings
        if name == "exec":
            exec_spec = build_spec(self.ws, s, self.policy, args, session_id)
            return await run_exec(self.sandbox, exec_spec, sink)
        if name == "read_file":
            return await asyncio.to_thread(files.read_file, self.ws, args, s.read_max_bytes)
        if name == "write_file":
            return await asyncio.to_thread(files.write_file, self.ws, args, s.write_max_bytes)
        if name == "edit_file":
            return await asyncio.to_thread(files.edit_file, self.ws, args, s.write_max_bytes)
        if name == "list_dir":
            return await asyncio.to_thread(files.list_dir, self.ws, args, s.list_max_entries)
        return await asyncio.to_thread(
            spreadsheet.read_spreadsheet, self.ws, args, s.read_max_bytes
        )


def parse_arguments(arguments_json: str) -> dict[str, Any]:
    """The arguments object; empty input means no arguments."""
    if not arguments_json.strip():
        return {}
    try:
        value = json.loads(arguments_json)
    except json.JSONDecodeError as exc:
        raise ToolError(f"arguments are not valid JSON ({exc.msg} at position {exc.pos})") from exc
    if not isinstance(value, dict):
        raise ToolError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value
