"""The tool this service offers the model: `read_skill` (a SKILL.md body or one resource file)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from skills.model import Entry, Snapshot
from skills.resources import ResourceError, list_resources, read_resource

READ_SKILL = {
    "name": "read_skill",
    "description": (
        "Read a skill's instructions (its SKILL.md) by name, or one of its files under "
        "scripts/, references/ or templates/ with `path`."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Skill name from <available_skills>."},
            "path": {
                "type": "string",
                "description": "Optional file inside the skill, e.g. references/api.md.",
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    },
}
TOOLS = [READ_SKILL]


@dataclass
class ToolResult:
    ok: bool
    output: str
    result: dict[str, Any] = field(default_factory=dict)
    truncated: bool = False


def skill_text(entry: Entry) -> str:
    """The body with a header telling where the folder is and what else it holds."""
    folder = entry.doc.folder
    resources = list_resources(entry.doc.where)
    lines = [f"Skill: {entry.name} ({entry.doc.source})"]
    if entry.sandbox_folder:
        lines.append(f"Folder: {entry.sandbox_folder} (read-only; run its scripts from there)")
    else:
        lines.append(f"Folder: {folder} (not visible to commands; read files with read_skill)")
    lines.append("Relative paths in this skill are relative to that folder.")
    if resources:
        lines.append("Resources (read_skill with path): " + ", ".join(resources))
    if not entry.available:
        lines.append("Not available here; missing: " + ", ".join(entry.missing))
    return "\n".join(lines) + "\n\n" + entry.doc.body


def run_tool(
    snapshot: Snapshot, name: str, arguments: dict[str, Any], max_chars: int
) -> ToolResult:
    """Runs a tool; every failure is a readable result, never an exception."""
    if name != READ_SKILL["name"]:
        return ToolResult(False, f"Unknown tool '{name}'. This service offers: read_skill.")
    skill = arguments.get("name")
    path = arguments.get("path") or ""
    if not isinstance(skill, str) or not skill.strip():
        return ToolResult(False, "read_skill needs 'name': the skill name (a string).")
    if not isinstance(path, str):
        return ToolResult(False, "'path' must be a string, e.g. references/api.md.")
    entry = snapshot.get(skill.strip())
    if entry is None:
        known = ", ".join(snapshot.names()) or "none"
        return ToolResult(False, f"Unknown skill '{skill}'. Skills: {known}")
    if not path or path.strip() in ("SKILL.md", "./SKILL.md"):
        text = skill_text(entry)
        cut = len(text) > max_chars
        if cut:
            text = text[:max_chars] + f"\n[... truncated at {max_chars} characters]"
        return ToolResult(True, text, {"name": entry.name, "path": "SKILL.md"}, cut)
    try:
        text, truncated = read_resource(entry.doc.where, path, max_chars)
    except ResourceError as exc:
        return ToolResult(False, f"Skill '{entry.name}': {exc}")
    return ToolResult(True, text, {"name": entry.name, "path": path}, truncated)


def parse_arguments(arguments_json: str) -> dict[str, Any] | str:
    """The arguments object, or a readable error."""
    try:
        value = json.loads(arguments_json or "{}")
    except json.JSONDecodeError as exc:
        return f"Arguments are not valid JSON ({exc.msg} at position {exc.pos})."
    if not isinstance(value, dict):
        return 'Arguments must be a JSON object, e.g. {"name": "git"}.'
    return value
