"""memory_search, memory_get, memory_write, memory_edit: the model's tools (shared contract)."""

from __future__ import annotations

import asyncio
from typing import Any

from crayfish_common.tools import CallContext, Tool, ToolError, ToolResult, ToolSet, object_schema

from memory.core import MemoryCore
from memory.notes import MemoryPathError

# Domain errors whose message tells the model what to fix (a bad path, a missing file, ...).
EXPECTED = (MemoryPathError, FileNotFoundError, ValueError, TimeoutError)


class MemoryTool(Tool):
    """A tool over the memory façade; its blocking calls run in a worker thread."""

    def __init__(self, core: MemoryCore) -> None:
        self.core = core


class MemorySearch(MemoryTool):
    name = "memory_search"
    description = (
        "Search saved memory (MEMORY.md, memory/*.md) before answering about prior work, "
        "decisions, dates, people, preferences or todos; cite hits as Source: path#Lx-Ly."
    )
    parameters = object_schema(
        {
            "query": {
                "type": "string",
                "minLength": 1,
                "description": "What to look for, in plain words.",
            },
            "top_k": {"type": "integer", "minimum": 1, "maximum": 50},
            "path_prefix": {"type": "string", "description": "e.g. memory/2026-05"},
        },
        required=["query"],
    )

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        query = args["query"]
        if not query.strip():
            raise ToolError("'query' is blank; say what to look for, in plain words")
        hits = await asyncio.to_thread(
            self.core.search, query, top_k=args.get("top_k"), path_prefix=args.get("path_prefix")
        )
        if not hits:
            return ToolResult(True, f"No matches in memory for {query!r}.", {"hits": []})
        blocks = [
            f"[{n}] score {h.score:.2f}\n{h.snippet}\nSource: {h.citation}"
            for n, h in enumerate(hits, start=1)
        ]
        found = [
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
        return ToolResult(True, "\n\n".join(blocks), {"hits": found})


class MemoryGet(MemoryTool):
    name = "memory_get"
    description = (
        "Read lines of a memory file (e.g. around a memory_search hit) to see its full context."
    )
    parameters = object_schema(
        {
            "path": {"type": "string", "description": "MEMORY.md or memory/....md"},
            "start_line": {"type": "integer", "minimum": 1},
            "line_count": {"type": "integer", "minimum": 1},
        },
        required=["path"],
    )

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        got = await asyncio.to_thread(
            self.core.get, args["path"], args.get("start_line", 0), args.get("line_count", 0)
        )
        if not got.text:
            output = f"{got.path} has {got.total_lines} lines; nothing at line {got.start_line}."
        else:
            citation = f"{got.path}#L{got.start_line}-L{got.end_line}"
            output = f"{citation} (of {got.total_lines})\n{got.text}"
        data = {
            "path": got.path,
            "start_line": got.start_line,
            "end_line": got.end_line,
            "total_lines": got.total_lines,
        }
        return ToolResult(True, output, data)


def session_author(call: CallContext) -> str:
    """The author of a revision the model makes: the calling session."""
    return f"session:{call.session_id or 'unknown'}"


REASON = {
    "type": "string",
    "description": "Why, in a few words; name the session or message it came from.",
}


class MemoryWrite(MemoryTool):
    name = "memory_write"
    description = (
        "Save a durable fact, decision or todo to memory (default: today's note "
        "memory/YYYY-MM-DD.md; or append to MEMORY.md, USER.md, SOUL.md, memory/*.md)."
    )
    parameters = object_schema(
        {
            "text": {"type": "string", "description": "The note, in Markdown."},
            "path": {
                "type": "string",
                "description": "MEMORY.md, USER.md, SOUL.md or memory/....md; default today's note",
            },
            "reason": REASON,
        },
        required=["text"],
    )

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        written = await asyncio.to_thread(
            self.core.write,
            args["text"],
            args.get("path", ""),
            session_author(call),
            args.get("reason", ""),
        )
        data = {
            "path": written.path,
            "start_line": written.start_line,
            "end_line": written.end_line,
            "citation": written.citation,
        }
        return ToolResult(True, f"Saved to memory. Source: {written.citation}", data)


class MemoryEdit(MemoryTool):
    name = "memory_edit"
    description = (
        "Change a small part of MEMORY.md, USER.md, SOUL.md or memory/*.md: old_text (copied "
        "exactly, occurring once) becomes new_text; every change is kept in memory's history."
    )
    parameters = object_schema(
        {
            "path": {
                "type": "string",
                "description": "MEMORY.md, USER.md, SOUL.md or memory/....md",
            },
            "old_text": {"type": "string", "minLength": 1, "description": "Exact text, once."},
            "new_text": {"type": "string", "description": "Its replacement ('' deletes it)."},
            "reason": {**REASON, "minLength": 1},
        },
        required=["path", "old_text", "new_text", "reason"],
    )

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        revision = await asyncio.to_thread(
            self.core.edit,
            args["path"],
            args["old_text"],
            args["new_text"],
            session_author(call),
            args["reason"],
        )
        path = revision.files[0] if revision.files else args["path"]
        output = f"Edited {path} (revision {revision.rev[:12]})."
        return ToolResult(True, output, {"path": path, "rev": revision.rev})


def memory_tools(core: MemoryCore) -> ToolSet:
    """The four tools over one façade; failures come back as results the model can read."""
    tools = [MemorySearch(core), MemoryGet(core), MemoryWrite(core), MemoryEdit(core)]
    return ToolSet(tools, expected=EXPECTED)
