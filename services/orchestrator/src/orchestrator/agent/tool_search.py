"""The tools of one turn, and tool_search / tool_describe for when there are too many to offer.

Past the registry's threshold, a turn starts with the built-in services' tools plus the search
pair; a tool that a search or describe finds (or that the model calls by its exact name) joins
the offered list for the rest of the turn, appended at its end so the list's earlier part stays
byte-identical from round to round (provider prompt caching).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from crayfish_common.tools import ToolResult

from orchestrator.agent.tool_owners import RefusedTool
from orchestrator.agent.tools import SEARCH_TOOLS, OfferedTool, ToolRegistry, check_arguments
from orchestrator.clients import OutputSink

log = logging.getLogger(__name__)

SEARCH, DESCRIBE = SEARCH_TOOLS
DEFAULT_HITS, MAX_HITS = 6, 10
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset("a an and the of to for in on with by or from my me is it".split())

SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "Keywords: what the tool should do."},
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_HITS},
    },
    "required": ["query"],
    "additionalProperties": False,
}
DESCRIBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "The tool's exact name."}},
    "required": ["name"],
    "additionalProperties": False,
}


def search_pair(hidden: list[OfferedTool]) -> list[OfferedTool]:
    """tool_search and tool_describe, their descriptions naming what they search."""
    services = ", ".join(dict.fromkeys(t.service_name for t in hidden))
    search = (
        f"Find tools among {len(hidden)} more that are not listed here (from: {services}) by "
        "keywords; the matches become callable by name."
    )
    describe = "Show a tool's full description and parameters (JSON schema); it becomes callable."
    return [
        OfferedTool(SEARCH, search, SEARCH_SCHEMA, None),
        OfferedTool(DESCRIBE, describe, DESCRIBE_SCHEMA, None),
    ]


def initial_offer(registry: ToolRegistry) -> list[OfferedTool]:
    """What a turn offers before any search: every tool, or the always-offered ones and the
    search pair past the threshold."""
    if not registry.searching:
        return list(registry.tools.values())
    shown = [t for t in registry.tools.values() if not registry.deferred(t)]
    hidden = [t for t in registry.tools.values() if registry.deferred(t)]
    return [*shown, *search_pair(hidden)]


@dataclass(frozen=True)
class ToolCatalog:
    """Every tool the model can use (GET /api/tools): (tool, deferred) in offering order."""

    entries: list[tuple[OfferedTool, bool]]
    unavailable: dict[str, str]
    searching: bool
    refused: list[RefusedTool]
    not_offered: dict[str, str] = field(default_factory=dict)


def tool_catalog(registry: ToolRegistry) -> ToolCatalog:
    """The offered tools first, then those a search would find (deferred)."""
    first = [(t, False) for t in initial_offer(registry)]
    found = [(t, True) for t in registry.tools.values() if registry.deferred(t)]
    return ToolCatalog(
        [*first, *found],
        dict(registry.unavailable),
        registry.searching,
        list(registry.refused),
        dict(registry.not_offered),
    )


# Checked before a call runs: gate(tool name, raw arguments, call id) -> None to run it, or the
# result the model reads instead (approvals/gate.py: exec approvals).
CallGate = Callable[[str, str, str], Awaitable[ToolResult | None]]


class TurnTools(Mapping[str, OfferedTool]):
    """The tools offered in one turn, by name, in offering order; `run` runs any of them.

    `only` restricts the turn to those tools (no search); otherwise, when the registry is
    searching, found tools are added as the turn goes.
    """

    def __init__(
        self, registry: ToolRegistry, only: set[str] | None = None, gate: CallGate | None = None
    ):
        self.registry = registry
        self.only = only
        self.gate = gate
        if only is not None:
            offered = [t for n, t in registry.tools.items() if n in only]
        else:
            offered = initial_offer(registry)
        self.offered: dict[str, OfferedTool] = {t.name: t for t in offered}
        self.searching = only is None and registry.searching

    def __getitem__(self, name: str) -> OfferedTool:
        return self.offered[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.offered)

    def __len__(self) -> int:
        return len(self.offered)

    def add(self, names: Iterable[str]) -> None:
        for name in names:
            tool = self.registry.tools.get(name)
            if tool is not None and name not in self.offered:
                self.offered[name] = tool

    async def run(
        self,
        name: str,
        raw_arguments: str,
        session_id: str,
        call_id: str,
        on_output: OutputSink | None = None,
    ) -> ToolResult:
        """Runs a call as the registry would, after the turn's own rules: the search pair,
        tools found or called by name, and tools this turn does not offer."""
        if self.searching and name in (SEARCH, DESCRIBE):
            return self._run_own(name, raw_arguments)
        if name in self.registry.tools and name not in self.offered:
            if not self.searching:
                offered = ", ".join(self.offered) or "none"
                return ToolResult(
                    False, f"Error: `{name}` is not available now; offered tools: {offered}."
                )
            self.add([name])  # called by its exact name: as good as found
        elif self.searching and name not in self.registry.tools:
            return ToolResult(
                False, f"Error: unknown tool `{name}`. Use {SEARCH} to find tools by keywords."
            )
        if self.gate is not None and name in self.registry.tools:
            refusal = await self.gate(name, raw_arguments, call_id)
            if refusal is not None:
                return refusal
        return await self.registry.run(name, raw_arguments, session_id, call_id, on_output)

    def _run_own(self, name: str, raw_arguments: str) -> ToolResult:
        schema = SEARCH_SCHEMA if name == SEARCH else DESCRIBE_SCHEMA
        arguments, problem = check_arguments(raw_arguments, schema)
        if problem:
            return ToolResult(False, f"Error: invalid arguments for `{name}`: {problem}")
        if name == SEARCH:
            return self._search(arguments["query"], int(arguments.get("limit", DEFAULT_HITS)))
        return self._describe(arguments["name"])

    def _search(self, query: str, limit: int) -> ToolResult:
        candidates = [t for t in self.registry.tools.values() if self.registry.deferred(t)]
        hits = rank_tools(candidates, query)[:limit]
        if not hits:
            return ToolResult(
                True, f"No tool matches {query!r}. Try other or fewer keywords.", {"tools": []}
            )
        self.add(t.name for t in hits)
        lines = [f"- {signature(t)} [{t.service_name}]: {t.description}" for t in hits]
        note = f"These tools are now offered: call them directly. {DESCRIBE} shows parameters."
        data = {"tools": [t.name for t in hits]}
        return ToolResult(True, "\n".join([*lines, note]), data)

    def _describe(self, name: str) -> ToolResult:
        tool = self.registry.tools.get(name)
        if tool is None:
            return ToolResult(False, f"Error: no tool named `{name}`; use {SEARCH} to find one.")
        self.add([name])
        described = {
            "name": tool.name,
            "service": tool.service_name,
            "description": tool.description,
            "parameters": tool.parameters,
        }
        return ToolResult(True, json.dumps(described, ensure_ascii=False, indent=1), described)


def rank_tools(tools: list[OfferedTool], query: str) -> list[OfferedTool]:
    """Tools matching any keyword, best first (name 3, parameters 2, description 1 per word;
    a word matches a whole word or, from 4 letters on, a word's start); ties keep list order."""
    terms = [w for w in _WORD.findall(query.lower()) if w not in _STOPWORDS]
    scored = []
    for index, tool in enumerate(tools):
        name = _words(tool.name)
        params = _words(" ".join(_properties(tool.parameters)))
        text = _words(tool.description)
        score = sum(
            3 * _matches(term, name) + 2 * _matches(term, params) + _matches(term, text)
            for term in terms
        )
        if score:
            scored.append((-score, index, tool))
    return [tool for _, _, tool in sorted(scored, key=lambda item: (item[0], item[1]))]


def signature(tool: OfferedTool) -> str:
    """`name(required, optional?)` from its schema."""
    required = set(tool.parameters.get("required", ()))
    args = [p if p in required else f"{p}?" for p in _properties(tool.parameters)]
    return f"{tool.name}({', '.join(args)})"


def _properties(schema: dict[str, Any]) -> list[str]:
    properties = schema.get("properties")
    return [str(p) for p in properties] if isinstance(properties, dict) else []


def _words(text: str) -> set[str]:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)  # camelCase -> camel Case
    return set(_WORD.findall(spaced.lower()))


def _matches(term: str, words: set[str]) -> int:
    if term in words:
        return 1
    return int(len(term) >= 4 and any(w.startswith(term) for w in words))
