"""The `db_query` tool: the tool contract's side (schema, arguments, the answer's text)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar

from crayfish_common.tools import CallContext, Tool, ToolResult, object_schema

from db_query_tool.query import QueryResult, ReadOnlyDatabase

SCALAR = {"type": ["string", "number", "boolean", "null"]}


class DbQueryTool(Tool):
    name: ClassVar[str] = "db_query"
    description: ClassVar[str] = (
        "Run one read-only SQL SELECT on the monitoring database (SQLite); tables and their "
        "columns are in sqlite_schema. Use ? placeholders with params for values."
    )
    parameters: ClassVar[dict[str, Any]] = object_schema(
        {
            "sql": {"type": "string", "description": "One SELECT statement (WITH allowed)."},
            "params": {
                "type": "array",
                "items": SCALAR,
                "description": "Values for the ? placeholders, in order.",
            },
        },
        required=["sql"],
    )

    def __init__(self, database: ReadOnlyDatabase, max_output_chars: int, concurrency: int = 4):
        self.database = database
        self.max_output_chars = max_output_chars
        self._slots = asyncio.Semaphore(concurrency)

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        async with self._slots:  # each query holds a thread while it runs
            result = await asyncio.to_thread(self.database.query, args["sql"], args.get("params"))
        text = render(result, self.database.limits.max_rows)
        if len(text) > self.max_output_chars:
            text = text[: self.max_output_chars] + "\n[... output cut; select fewer columns]"
        data = {"columns": result.columns, "rows": result.rows, "truncated": result.truncated}
        return ToolResult(
            True, text, data, duration_ms=result.elapsed_ms, truncated=result.truncated
        )


def render(result: QueryResult, max_rows: int) -> str:
    """Columns, then one JSON array per row, then the count (and whether rows were cut)."""
    lines = ["columns: " + json.dumps(result.columns, ensure_ascii=False)]
    lines += [json.dumps(row, ensure_ascii=False, default=str) for row in result.rows]
    if result.truncated:
        lines.append(f"(first {max_rows} rows only: more matched; add WHERE or LIMIT)")
    else:
        lines.append(f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''})")
    return "\n".join(lines)
