"""A real tool service (crayfish.common.v1.ToolService over gRPC) with N generated tools, shaped
like MCP servers' tools (a few documented parameters each), for tests and benches.

    python -m tests.fakes.generated_tools --count 150 --port 50070
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

from crayfish_common.grpc_server import GrpcService
from crayfish_common.tool_service import TOOL_SERVICE_NAME, ToolSetServicer
from crayfish_common.tools import CallContext, Tool, ToolResult, ToolSet, object_schema

SYSTEMS = [
    ("github", "issues and pull requests of a GitHub repository"),
    ("jira", "tickets in a Jira project"),
    ("calendar", "events in the user's calendar"),
    ("slack", "messages in a Slack channel"),
    ("drive", "files in a shared drive folder"),
    ("crm", "customer records in the CRM"),
    ("billing", "invoices in the billing system"),
    ("wiki", "pages of the team wiki"),
    ("grafana", "dashboards and alerts in Grafana"),
    ("postgres", "tables of the analytics database"),
]
ID = ("string", "The item's identifier.")
QUERY = ("string", "Which items; empty for all.")
ACTIONS: list[tuple[str, str, dict[str, tuple[str, str]]]] = [
    ("list", "List", {"limit": ("integer", "Most items to return (default 20).")}),
    ("get", "Get one of the", {"id": ID}),
    ("search", "Search", {"query": QUERY, "since": ("string", "ISO date: changed after it.")}),
    ("create", "Create one of the", {"title": ("string", "A title."), "body": ("string", "Text.")}),
    ("update", "Update one of the", {"id": ID, "fields": ("object", "Fields to change.")}),
    ("delete", "Delete one of the", {"id": ID, "confirm": ("boolean", "Must be true.")}),
    ("comment", "Add a comment to one of the", {"id": ID, "text": ("string", "The comment.")}),
    ("export", "Export", {"format": ("string", "csv or json."), "query": QUERY}),
    ("count", "Count", {"query": QUERY}),
    ("watch", "Subscribe to changes of", {"query": QUERY, "webhook": ("string", "URL to call.")}),
    ("archive", "Archive one of the", {"id": ID}),
    ("assign", "Assign one of the", {"id": ID, "user": ("string", "Who gets it.")}),
    ("label", "Label one of the", {"id": ID, "labels": ("array", "Labels to add.")}),
    ("history", "Show the change history of one of the", {"id": ID}),
    ("stats", "Summary statistics of", {"period": ("string", "day, week or month.")}),
]


def tool_specs(count: int, prefix: str = "") -> list[tuple[str, str, dict[str, Any]]]:
    """`count` distinct (name, description, schema): every action of a system, then the next."""
    specs = []
    for i in range(count):
        system, what = SYSTEMS[(i // len(ACTIONS)) % len(SYSTEMS)]
        action, verb, params = ACTIONS[i % len(ACTIONS)]
        round_no = i // (len(ACTIONS) * len(SYSTEMS))
        name = f"{prefix}{system}_{action}" + (f"_{round_no + 1}" if round_no else "")
        properties = {p: _property(t, d) for p, (t, d) in params.items()}
        required = [p for p in params if p in ("id", "query", "title", "text")]
        description = f"{verb} {what}."
        specs.append((name, description, object_schema(properties, required)))
    return specs


def _property(kind: str, description: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": kind, "description": description}
    if kind == "array":  # OpenAI refuses an array schema without `items`
        schema["items"] = {"type": "string"}
    return schema


class GeneratedTool(Tool):
    """Answers with its name and arguments, so a test sees which tool ran with what."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    parameters: ClassVar[dict[str, Any]] = {}

    origin: ClassVar[str] = ""  # said in the answer, to tell two services apart

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        where = f" at {self.origin}" if self.origin else ""
        return ToolResult(True, f"{self.name}{where} ran with {json.dumps(args, sort_keys=True)}")


def generated_tool_set(specs: list[tuple[str, str, dict[str, Any]]], origin: str = "") -> ToolSet:
    attributes = [
        {"name": n, "description": d, "parameters": p, "origin": origin} for n, d, p in specs
    ]
    tools = [type(f"Generated_{a['name']}", (GeneratedTool,), a)() for a in attributes]
    return ToolSet(tools)


@asynccontextmanager
async def generated_tool_service(
    specs: list[tuple[str, str, dict[str, Any]]],
    origin: str = "",
    not_offered: dict[str, str] | None = None,
) -> AsyncIterator[str]:
    """Serves the tools on a free loopback port in this event loop; yields its address.
    `not_offered` names tools the service holds back, with the reason ListTools gives."""
    servicer = ToolSetServicer(generated_tool_set(specs, origin), not_offered)
    service = GrpcService([TOOL_SERVICE_NAME], [servicer.register])
    port = await service.start("127.0.0.1:0")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await service.stop(0)


async def _serve(specs: list[tuple[str, str, dict[str, Any]]], port: int, origin: str) -> None:
    servicer = ToolSetServicer(generated_tool_set(specs, origin))
    service = GrpcService([TOOL_SERVICE_NAME], [servicer.register])
    await service.start(f"127.0.0.1:{port}")
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=150)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--prefix", default="", help="put before every tool name")
    parser.add_argument("--names", default="", help="comma-separated names instead of --count")
    parser.add_argument("--origin", default="", help="said in every answer")
    args = parser.parse_args()
    specs = tool_specs(args.count, args.prefix)
    if args.names:
        schema = object_schema({"command": {"type": "string"}}, [])
        specs = [(n, f"The {n} tool.", schema) for n in args.names.split(",")]
    asyncio.run(_serve(specs, args.port, args.origin))


if __name__ == "__main__":
    main()
