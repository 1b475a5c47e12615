"""The tools memory offers the model (memory_search, memory_get, memory_write) and how they run."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from memory.files import MemoryPathError
from memory.service import MemoryService

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    output: str
    result: dict[str, Any]
    error: str = ""


TOOLS = [
    ToolSpec(
        "memory_search",
        "Search saved memory (MEMORY.md, memory/*.md) before answering about prior work, "
        "decisions, dates, people, preferences or todos; cite hits as Source: path#Lx-Ly.",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for, in plain words."},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 50},
                "path_prefix": {"type": "string", "description": "e.g. memory/2026-05"},
            },
            "required": ["query"],
        },
    ),
    ToolSpec(
        "memory_get",
        "Read lines of a memory file (e.g. around a memory_search hit) to see its full context.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "MEMORY.md or memory/....md"},
                "start_line": {"type": "integer", "minimum": 1},
                "line_count": {"type": "integer", "minimum": 1},
            },
            "required": ["path"],
        },
    ),
    ToolSpec(
        "memory_write",
        "Save a durable fact, decision or todo to today's memory note so it can be recalled later.",
        {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The note, in Markdown."}},
            "required": ["text"],
        },
    ),
]


def _search(service: MemoryService, args: dict[str, Any]) -> ToolResult:
    query = _text(args, "query")
    top_k = args.get("top_k")
    hits = service.search(
        query,
        top_k=int(top_k) if top_k else None,
        path_prefix=str(args.get("path_prefix") or ""),
    )
    if not hits:
        return ToolResult(True, f"No matches in memory for {query!r}.", {"hits": []})
    blocks = [
        f"[{n}] score {h.score:.2f}\n{h.snippet}\nSource: {h.citation}"
        for n, h in enumerate(hits, start=1)
    ]
    result = {
        "hits": [
            {
                "path": h.path,
                "start_line": h.start_line,
                "end_line": h.end_line,
                "score": round(h.score, 4),
                "citation": h.citation,
                "source": h.source,
            }
            for h in hits
        ]
    }
    return ToolResult(True, "\n\n".join(blocks), result)


def _get(service: MemoryService, args: dict[str, Any]) -> ToolResult:
    got = service.get(
        _text(args, "path"), int(args.get("start_line") or 0), int(args.get("line_count") or 0)
    )
    if not got.text:
        output = f"{got.path} has {got.total_lines} lines; nothing at line {got.start_line}."
    else:
        output = f"{got.path}#L{got.start_line}-L{got.end_line} (of {got.total_lines})\n{got.text}"
    result = {
        "path": got.path,
        "start_line": got.start_line,
        "end_line": got.end_line,
        "total_lines": got.total_lines,
    }
    return ToolResult(True, output, result)


def _write(service: MemoryService, args: dict[str, Any]) -> ToolResult:
    written = service.write(_text(args, "text"))
    result = {
        "path": written.path,
        "start_line": written.start_line,
        "end_line": written.end_line,
        "citation": written.citation,
    }
    return ToolResult(True, f"Saved to memory. Source: {written.citation}", result)


def _text(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"argument {key!r} is required and must be a non-empty string")
    return value


RUNNERS = {"memory_search": _search, "memory_get": _get, "memory_write": _write}


def run_tool(service: MemoryService, name: str, arguments_json: str) -> ToolResult:
    """Runs a tool; every failure becomes a readable result, never an exception."""
    runner = RUNNERS.get(name)
    if runner is None:
        known = ", ".join(RUNNERS)
        return ToolResult(False, f"Unknown tool {name!r}; memory offers {known}.", {}, "unknown")
    try:
        args = json.loads(arguments_json or "{}")
        if not isinstance(args, dict):
            raise ValueError("arguments must be a JSON object")
        return runner(service, args)
    except json.JSONDecodeError as exc:
        return ToolResult(False, f"Arguments are not valid JSON: {exc}", {}, "bad_arguments")
    except (ValueError, TypeError, MemoryPathError, FileNotFoundError, TimeoutError) as exc:
        return ToolResult(False, f"{name} failed: {exc}", {}, type(exc).__name__)
    except Exception as exc:  # a tool failure is a result for the model, never a crash
        log.exception("tool %s failed", name)
        return ToolResult(False, f"{name} failed unexpectedly: {exc}", {}, type(exc).__name__)
