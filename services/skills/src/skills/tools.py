"""The tool this service offers the model: `read_skill` (a SKILL.md body or one resource file)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from crayfish_common.tools import CallContext, Tool, ToolError, ToolResult, ToolSet, object_schema

from skills.core import SkillsCore
from skills.model import Entry, Snapshot
from skills.resources import ResourceError, list_resources, read_resource

SnapshotSource = Callable[[], Awaitable[Snapshot]]
BODY_PATHS = ("", "SKILL.md", "./SKILL.md")


def skill_text(entry: Entry) -> str:
    """The body with a header telling where the folder is and what else it holds."""
    resources = list_resources(entry.doc.where)
    lines = [f"Skill: {entry.name} ({entry.doc.source})"]
    if entry.sandbox_folder:
        lines.append(f"Folder: {entry.sandbox_folder} (read-only; run its scripts from there)")
    else:
        lines.append(
            f"Folder: {entry.doc.folder} (not visible to commands; read files with read_skill)"
        )
    lines.append("Relative paths in this skill are relative to that folder.")
    if resources:
        lines.append("Resources (read_skill with path): " + ", ".join(resources))
    if entry.secrets:
        lines.append(
            f"Secrets: {', '.join(entry.secrets)} (values hidden): run this skill's commands "
            f'with exec\'s "skill": "{entry.name}" so they get them.'
        )
    if not entry.available:
        lines.append("Not available here; missing: " + ", ".join(entry.missing))
    return "\n".join(lines) + "\n\n" + entry.doc.body


class ReadSkill(Tool):
    """Reads from the catalog snapshot current at the call."""

    name = "read_skill"
    description = (
        "Read a skill's instructions (its SKILL.md) by name, or one of its files under "
        "scripts/, references/ or templates/ with `path`."
    )
    parameters = object_schema(
        {
            "name": {"type": "string", "description": "Skill name from <available_skills>."},
            "path": {
                "type": "string",
                "description": "Optional file inside the skill, e.g. references/api.md.",
            },
        },
        required=["name"],
    )

    def __init__(self, snapshot: SnapshotSource, max_chars: int):
        self.snapshot = snapshot
        self.max_chars = max_chars

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        snapshot = await self.snapshot()
        entry = snapshot.get(args["name"].strip())
        if entry is None:
            known = ", ".join(snapshot.names()) or "none"
            raise ToolError(f"Unknown skill '{args['name']}'. Skills: {known}")
        path = args.get("path", "")
        if path.strip() in BODY_PATHS:
            return self._body(entry)
        try:
            text, truncated = read_resource(entry.doc.where, path, self.max_chars)
        except ResourceError as exc:
            raise ToolError(f"Skill '{entry.name}': {exc}") from None
        return ToolResult(True, text, {"name": entry.name, "path": path}, truncated=truncated)

    def _body(self, entry: Entry) -> ToolResult:
        text = skill_text(entry)
        cut = len(text) > self.max_chars
        if cut:
            text = text[: self.max_chars] + f"\n[... truncated at {self.max_chars} characters]"
        return ToolResult(True, text, {"name": entry.name, "path": "SKILL.md"}, truncated=cut)


def skill_tools(core: SkillsCore) -> ToolSet:
    """The service's tools, reading the catalog `core` keeps current."""
    return ToolSet([ReadSkill(core.snapshot, core.settings.max_resource_chars)])
