"""Tool hints: one line naming the tool a turn runs and its main argument ("🔧 exec: ls -la"),
cut short, with what looks like a credential masked.

A tool's arguments are the model's own words, never the secrets file's values (those exist only
in the tool-runner, which redacts them from outputs), but a person may have pasted a key into a
chat, and a hint may show in a group: so bearer tokens, `password=`/`token=`-style values,
credentials in URLs and long opaque strings become `***`. Not a guarantee, a guard against
accidents, as the tool-runner's redaction is."""

from __future__ import annotations

import json
import re
from typing import Any

HINT_CHARS = 80  # a hint is a glance, not the command
# The argument a reader cares about, as the web page picks it (render.js's ARG_KEYS).
ARG_KEYS = ("command", "path", "query", "name", "pattern", "url")
MASK = "***"
MASKS = (
    # Authorization: Bearer abc…, Basic …
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{6,}"), rf"\1 {MASK}"),
    # password=…, API_KEY: …, --token …, "secret": "…"
    (
        re.compile(
            r"(?i)([A-Za-z0-9_-]*(?:passw(?:or)?d|pwd|secret|token|api[_-]?key|auth)"
            r"[A-Za-z0-9_-]*[\"']?\s*(?:[=:]|\s)\s*)(\"[^\"]*\"|'[^']*'|[^\s\"',;&|]+)"
        ),
        rf"\1{MASK}",
    ),
    # https://user:password@host
    (re.compile(r"(://)[^/\s:@]+:[^/\s@]+@"), rf"\1{MASK}@"),
    # Keys by their known prefixes, and any long run of key-like characters.
    (re.compile(r"\b(?:sk|pk|ghp|gho|ghs|glpat|xox[abpr]|xapp|AKIA)[-_A-Za-z0-9]{8,}"), MASK),
    (re.compile(r"[A-Za-z0-9+_-]{32,}={0,2}"), MASK),
)


def tool_hint(tool: str, arguments: Any) -> str:
    """ "🔧 tool: argument", masked, at most about HINT_CHARS long."""
    argument = masked(_main_argument(arguments)).replace("\n", " ⏎ ").strip()
    if len(argument) > HINT_CHARS:
        argument = argument[: HINT_CHARS - 1].rstrip() + "…"
    name = re.sub(r"[^A-Za-z0-9_.-]", "", tool)[:64] or "tool"
    # As code: the platform's Markdown conversion leaves `*.py` or `__init__` as they are.
    return f"🔧 {name}: `{argument.replace('`', chr(39))}`" if argument else f"🔧 {name}"


def masked(text: str) -> str:
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


def _main_argument(arguments: Any) -> str:
    """The argument a reader cares about; the whole arguments when none is known."""
    parsed = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return arguments
    if isinstance(parsed, dict):
        for key in ARG_KEYS:
            if isinstance(parsed.get(key), str):
                return str(parsed[key])
        return json.dumps(parsed, ensure_ascii=False)
    return "" if parsed is None else str(parsed)
