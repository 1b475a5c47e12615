"""Writes the settings reference in docs/configuration.md from the services' settings classes.

`python scripts/gen_config_docs.py` rewrites everything below the marker line; `--check` only
says whether the file is up to date (tests/docs/test_configuration_reference.py runs that check).
A field is described by the comment lines right above it in its class (the house way); a comment
line `# --- Title ---` starts a section. A field with neither a comment nor a pydantic
`description` stops the script with its name, so every new setting gets documented.
"""

from __future__ import annotations

import argparse
import ast
import enum
import importlib
import inspect
import json
import re
import sys
import textwrap
import types
import typing
from dataclasses import dataclass
from pathlib import Path

from annotated_types import Ge, Gt, Le, Lt
from pydantic import AliasChoices
from pydantic_settings import BaseSettings

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "configuration.md"
COMMAND = "python scripts/gen_config_docs.py"
MARKER = f"<!-- Generated below by `{COMMAND}` from the settings classes: edit those, not this. -->"
# Service -> its settings class, in the order the reference shows them.
SERVICES = {
    "orchestrator": "orchestrator.config:Settings",
    "tool-runner": "tool_runner.config:ToolRunnerSettings",
    "memory": "memory.config:MemorySettings",
    "skills": "skills.config:SkillsSettings",
    "connectors": "connectors.config:ConnectorsSettings",
    "channels": "channels.config:ChannelsSettings",
    "browser": "browser.config:BrowserSettings",
}
SECTION = re.compile(r"#\s*---\s*(.+?)\s*---\s*$")
LONG_DEFAULT = 60  # characters; a longer default is left to the source


class Undocumented(Exception):
    """A setting without a description."""


@dataclass(frozen=True)
class Row:
    variable: str
    type: str
    default: str
    description: str
    section: str


@dataclass(frozen=True)
class Comment:
    description: str
    section: str


def class_comments(cls: type) -> dict[str, Comment]:
    """Each field of the class's own body -> the comment above it and its section."""
    lines, _ = inspect.getsourcelines(cls)
    body = ast.parse(textwrap.dedent("".join(lines))).body[0]
    assert isinstance(body, ast.ClassDef)
    found: dict[str, Comment] = {}
    section = ""
    for statement in body.body:
        if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
            continue
        above: list[str] = []
        index = statement.lineno - 2  # the line above, 0-based
        while index >= 0 and lines[index].strip().startswith("#"):
            above.insert(0, lines[index].strip())
            index -= 1
        for number, line in reversed(list(enumerate(above))):  # the last heading counts
            if match := SECTION.fullmatch(line):
                section, above = match.group(1), above[number + 1 :]
                break
        text = " ".join(line.lstrip("#").strip() for line in above)
        found[statement.target.id] = Comment(text, section)
    return found


def comments(cls: type[BaseSettings]) -> dict[str, Comment]:
    """Every field's comment, a subclass's own winning over its bases'."""
    merged: dict[str, Comment] = {}
    for klass in reversed(cls.__mro__):
        if issubclass(klass, BaseSettings) and klass.__module__ != "pydantic_settings.main":
            for field, comment in class_comments(klass).items():
                if comment.description or field not in merged:
                    merged[field] = comment
    return merged


def env_names(cls: type[BaseSettings], field: str) -> list[str]:
    """The variables a field is read from: its alias or aliases, else prefix + name."""
    alias = cls.model_fields[field].validation_alias
    if isinstance(alias, str):
        return [alias]
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices]
    return [f"{cls.model_config.get('env_prefix') or ''}{field}".upper()]


def type_name(annotation: object) -> str:
    """A short, readable name: `int`, `Path | None`, `"dense" | "keyword"`, `list[str]`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f'"{arg}"' for arg in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(type_name(arg) for arg in args)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is not None:
        return f"{origin.__name__}[{', '.join(type_name(arg) for arg in args)}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


def bounds(metadata: list[object]) -> str:
    """The field's numeric bounds, e.g. `≥ 0`."""
    shown = []
    for item in metadata:
        for kind, sign in ((Gt, ">"), (Ge, "≥"), (Lt, "<"), (Le, "≤")):
            if isinstance(item, kind):
                shown.append(f"{sign} {getattr(item, kind.__name__.lower())}")
    return ", ".join(shown)


def default_text(value: object, source: str) -> str:
    """The default as one would write it in the environment."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, Path) and value.is_absolute():  # found where the package is installed
        return f"`{value.name}/` beside `{source}`"
    if isinstance(value, enum.Enum):
        value = value.value
    text = json.dumps(value, default=str) if isinstance(value, list | dict) else str(value)
    if not text:
        return "empty"
    if len(text) > LONG_DEFAULT:
        return f"see `{source}`"
    return "`" + text.replace("|", "\\|") + "`"


def rows(cls: type[BaseSettings]) -> list[Row]:
    """One row per field of the settings class, in its order; Undocumented names those without
    a description."""
    described = comments(cls)
    source = str(Path(inspect.getfile(cls)).resolve().relative_to(ROOT))
    found, missing = [], []
    for field, info in cls.model_fields.items():
        comment = described.get(field, Comment("", ""))
        description = info.description or comment.description
        missing += [] if description else [f"{cls.__name__}.{field} ({source})"]
        limits = bounds(info.metadata)
        value = info.get_default(call_default_factory=True)
        found.append(
            Row(
                variable=" or ".join(f"`{name}`" for name in env_names(cls, field)),
                type=type_name(info.annotation) + (f", {limits}" if limits else ""),
                default=default_text(value, source),
                description=description.replace("|", "\\|"),
                section=comment.section,
            )
        )
    if missing:
        raise Undocumented(missing)
    return found


def service_markdown(service: str, cls: type[BaseSettings]) -> str:
    """The service's heading and a table per section of its settings."""
    source = Path(inspect.getfile(cls)).resolve().relative_to(ROOT)
    out = [f"### {service}", "", f"`{cls.__name__}` in [{source.name}](../{source}).", ""]
    section = None
    for row in rows(cls):
        if row.section != section:
            if row.section:
                out += [""] * (out[-1] != "") + [f"#### {service}: {row.section}", ""]
            out += ["| variable | type | default | meaning |", "|---|---|---|---|"]
            section = row.section
        out.append(f"| {row.variable} | {row.type} | {row.default} | {row.description} |")
    return "\n".join(out) + "\n"


def load(target: str) -> type[BaseSettings]:
    module, name = target.split(":")
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, BaseSettings), target
    return cls


def render(current: str) -> str:
    """The document with its generated part made anew (the part above the marker is kept)."""
    if MARKER not in current:
        raise SystemExit(f"{DOC.relative_to(ROOT)} lost its marker line: {MARKER}")
    kept = current.split(MARKER)[0]
    parts, missing = [], []
    for name, target in SERVICES.items():
        try:
            parts.append(service_markdown(name, load(target)))
        except Undocumented as exc:
            missing += exc.args[0]
    if missing:
        raise Undocumented(missing)
    return f"{kept}{MARKER}\n\n" + "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether it is up to date")
    args = parser.parse_args()
    current = DOC.read_text()
    try:
        wanted = render(current)
    except Undocumented as exc:
        print("No description (add a comment right above each):", file=sys.stderr)
        print("\n".join(f"  {name}" for name in exc.args[0]), file=sys.stderr)
        return 1
    if current == wanted:
        return 0
    if args.check:
        print(f"{DOC.relative_to(ROOT)} is out of date: run `{COMMAND}`", file=sys.stderr)
        return 1
    DOC.write_text(wanted)
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
