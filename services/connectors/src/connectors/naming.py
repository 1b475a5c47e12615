"""Model-facing names of MCP tools: `mcp_<server>_<tool>`, in [A-Za-z0-9_-], at most 64, unique."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

MAX_NAME = 64
PREFIX = "mcp_"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_SUFFIX = 9  # "_" + 8 hex digits


def sanitise(text: str) -> str:
    """Every character outside [A-Za-z0-9_-] becomes `_` (so "a.b/c" is "a_b_c")."""
    return _UNSAFE.sub("_", text)


def base_name(server: str, tool: str) -> str:
    """`mcp_<server>_<tool>` sanitised; a long one is cut and given a suffix from its origin."""
    name = sanitise(f"{PREFIX}{server}_{tool}")
    if len(name) <= MAX_NAME:
        return name
    return name[: MAX_NAME - _SUFFIX] + _suffix(server, tool)


def assign_names(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """A unique name per (server, tool), the same for the same set whatever the order.

    On a clash (e.g. servers "a.b" and "a_b"), the first pair in sorted order keeps the plain
    name and the others get a suffix derived from their own server and tool names.
    """
    names: dict[tuple[str, str], str] = {}
    taken: set[str] = set()
    for server, tool in sorted(set(pairs)):
        name = base_name(server, tool)
        if name in taken:
            name = name[: MAX_NAME - _SUFFIX] + _suffix(server, tool)
        counter = 2
        while name in taken:  # a suffix clash too: vanishingly rare, still deterministic
            name = name[: MAX_NAME - _SUFFIX - 3] + _suffix(server, tool) + f"_{counter:02d}"
            counter += 1
        taken.add(name)
        names[(server, tool)] = name
    return names


def _suffix(server: str, tool: str) -> str:
    return "_" + hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
