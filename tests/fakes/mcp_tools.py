"""A real MCP server (the `mcp` SDK's MCPServer, stdio) offering N generated tools, for benches.

    python -m tests.fakes.mcp_tools --count 150      # from the repository root (cwd)

The tools are generated_tools.py's (`github_list`, `jira_comment`, ...: the same names,
descriptions and documented parameters), declared as MCP servers written with the SDK declare
theirs: typed, `Annotated` parameters with a `Field(description=...)`, optional ones defaulting to
None, so their input schemas are the SDK's own (pydantic: `title`s, `anyOf` with null, defaults).
A tool answers `<name> ran with <arguments as JSON>`.
"""

from __future__ import annotations

import argparse
import inspect
import json
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from tests.fakes.generated_tools import tool_specs

PYTHON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "boolean": bool,
    "object": dict[str, Any],
    "array": list[str],
}


def mcp_tool_server(count: int, prefix: str = "") -> MCPServer:
    server = MCPServer("generated")
    for name, description, schema in tool_specs(count, prefix):
        server.add_tool(tool_function(name, schema), name=name, description=description)
    return server


def tool_function(name: str, schema: dict[str, Any]) -> Callable[..., Any]:
    """A handler whose signature (what the SDK reads its input schema from) follows `schema`."""

    async def run(**arguments: Any) -> str:
        given = {k: v for k, v in arguments.items() if v is not None}
        return f"{name} ran with {json.dumps(given, sort_keys=True)}"

    run.__name__ = run.__qualname__ = name  # the SDK titles the schema `<function>Arguments`
    required = set(schema.get("required", []))
    parameters = []
    for parameter, spec in schema["properties"].items():
        kind = PYTHON_TYPES[spec["type"]]
        documented = Field(description=spec["description"])
        if parameter in required:
            annotation: Any = Annotated[kind, documented]
            default: Any = inspect.Parameter.empty
        else:
            annotation, default = Annotated[kind | None, documented], None
        parameters.append(
            inspect.Parameter(
                parameter, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
            )
        )
    run.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=150)
    parser.add_argument("--prefix", default="", help="put before every tool name")
    args = parser.parse_args()
    mcp_tool_server(args.count, args.prefix).run("stdio")


if __name__ == "__main__":
    main()
