"""Which service a tool name belongs to: its first owner, for the life of the process.

The built-in services' names are theirs from the start, listed or not: while the tool-runner is
down, a custom service that offers `exec` must not receive the model's commands. Any other name
goes to the first service that lists it (in ranking order when two list it together); a later
offer of the same name by another service is refused, never granted because the owner is down.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

log = logging.getLogger(__name__)

# The orchestrator's own tools (agent/tool_search.py; own_tools.py) and the built-in
# services' tools. A name a built-in service adds later is still claimed on its first listing.
BUILTIN_TOOLS: dict[str, tuple[str, ...]] = {
    "orchestrator": (
        "tool_search",
        "tool_describe",
        "schedule_add",
        "schedule_list",
        "schedule_remove",
        "notify",
        "spawn",
        "subagents",
    ),
    "tool-runner": (
        "exec",
        "process",
        "read_file",
        "write_file",
        "edit_file",
        "list_dir",
        "read_spreadsheet",
    ),
    "memory": ("memory_search", "memory_get", "memory_write", "memory_edit"),
    "skills": ("read_skill",),
    "connectors": ("web_fetch", "web_search"),
}
# Name spaces filled at run time: the connectors' MCP tools (`mcp_<server>_<tool>`).
BUILTIN_PREFIXES: dict[str, str] = {"mcp_": "connectors", "memory_": "memory"}


@dataclass(frozen=True)
class RefusedTool:
    """A tool a service offers under a name that belongs to another service."""

    name: str
    service: str
    owner: str


class ToolOwners:
    """The owner of every tool name seen; `services` are the names of the configured ones."""

    def __init__(self, services: Iterable[str]):
        present = {*services, "orchestrator"}
        self._owners = {
            name: owner
            for owner, names in BUILTIN_TOOLS.items()
            if owner in present
            for name in names
        }
        self._prefixes = {p: owner for p, owner in BUILTIN_PREFIXES.items() if owner in present}
        self._logged: set[RefusedTool] = set()

    def owner_of(self, name: str) -> str | None:
        owner = self._owners.get(name)
        if owner is None:
            owner = next((o for p, o in self._prefixes.items() if name.startswith(p)), None)
        return owner

    def claim(self, name: str, service: str) -> RefusedTool | None:
        """None when `name` is (now) `service`'s; else the refusal, logged once."""
        owner = self.owner_of(name)
        if owner is None:
            self._owners[name] = service
            return None
        if owner == service:
            return None
        refused = RefusedTool(name, service, owner)
        if refused not in self._logged:
            self._logged.add(refused)
            log.warning(
                "tool %r offered by %s is refused: the name belongs to %s",
                name,
                service,
                owner,
            )
        return refused
