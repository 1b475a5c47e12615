"""The prompt's Skills section: escaped `<available_skills>` XML within a size budget.

Written as text, not with ElementTree: the budget counts characters of the exact output, so
each element's size is needed before the section is put together.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape as _escape

from skills.model import Entry

_ENTITIES = {'"': "&quot;", "'": "&apos;"}
HEAD = "<available_skills>\n"
TAIL = "</available_skills>"
# Room kept for the "<!-- N skills not listed -->" line when anything is cut.
NOTE_RESERVE = 80


def escape(text: str) -> str:
    return _escape(text, _ENTITIES)


def skill_xml(entry: Entry, with_description: bool = True) -> str:
    """One `<skill>` element; unavailable skills carry `<requires>` with what is missing."""
    available = "true" if entry.available else "false"
    lines = [f'  <skill available="{available}">', f"    <name>{escape(entry.name)}</name>"]
    if with_description:
        lines.append(f"    <description>{escape(entry.doc.meta.description)}</description>")
    lines.append(f"    <location>{escape(entry.shown_location)}</location>")
    if entry.missing:
        lines.append(f"    <requires>{escape(', '.join(entry.missing))}</requires>")
    lines.append("  </skill>\n")
    return "\n".join(lines)


@dataclass
class PromptSection:
    xml: str
    omitted: int


def build_xml(entries: list[Entry], max_chars: int) -> PromptSection:
    """All model-invocable skills; over budget, first descriptions go, then whole skills.

    Both steps take unavailable skills first, then available ones from the end of the
    (name-sorted) list, so the available skills early in the list keep their descriptions longest.
    """
    shown = [e for e in entries if e.doc.meta.model_invocable]
    if not shown:
        return PromptSection("", 0)
    full = {e.name: skill_xml(e, True) for e in shown}
    short = {e.name: skill_xml(e, False) for e in shown}
    order = [e.name for e in reversed(shown) if not e.available]
    order += [e.name for e in reversed(shown) if e.available]
    kept = {e.name for e in shown}
    described = set(kept)
    total = len(HEAD) + len(TAIL) + sum(len(full[n]) for n in kept)
    budget = max_chars - NOTE_RESERVE if total > max_chars else max_chars
    for name in order:
        if total <= budget:
            break
        described.discard(name)
        total -= len(full[name]) - len(short[name])
    for name in order:
        if total <= budget:
            break
        kept.discard(name)
        total -= len(short[name])
    parts = [HEAD]
    for entry in shown:
        if entry.name in kept:
            parts.append(full[entry.name] if entry.name in described else short[entry.name])
    omitted = len(shown) - len(described)
    if omitted:
        dropped = len(shown) - len(kept)
        parts.append(
            f"  <!-- {omitted} skills shortened or left out to fit the budget"
            f" ({dropped} not listed) -->\n"
        )
    parts.append(TAIL)
    return PromptSection("".join(parts), omitted)


def always_bodies(entries: list[Entry]) -> str:
    """Bodies of the available `always` skills, each wrapped with its name and folder."""
    blocks = []
    for entry in entries:
        if entry.doc.meta.always and entry.available:
            folder = escape(entry.sandbox_folder or str(entry.doc.folder))
            head = f'<skill name="{escape(entry.name)}" folder="{folder}">'
            blocks.append(f"{head}\n{entry.doc.body}\n</skill>")
    return "\n\n".join(blocks)
