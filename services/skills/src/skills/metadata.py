"""Skill metadata the way nanobot and OpenClaw write it: `metadata.<nanobot|openclaw|clawdbot>`.

Checked by hand, not by a pydantic model: the loose shapes authors write (a string for a list,
metadata as a JSON string, yes/no flags) are accepted and each reason names the key as written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from skills.frontmatter import SkillFileError, check_values

NAMESPACES = ("nanobot", "openclaw", "clawdbot")
NAME_MAX = 64
DESCRIPTION_MAX = 1024
_OS_ALIASES = {"macos": "darwin", "mac": "darwin", "osx": "darwin", "windows": "win32"}
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BAD_NAME = re.compile(r"[/\\\x00-\x1f<>&\"']")


@dataclass
class SkillMeta:
    """Everything the catalog needs from a frontmatter mapping."""

    name: str
    description: str
    version: str = ""
    emoji: str = ""
    always: bool = False
    bins: list[str] = field(default_factory=list)
    any_bins: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=list)
    os: list[str] = field(default_factory=list)
    primary_env: str = ""
    install: list[Any] = field(default_factory=list)
    model_invocable: bool = True
    homepage: str = ""


def _from_text(value: str, what: str) -> Any:
    """A metadata value written as a JSON (or YAML flow) string."""
    try:
        parsed = json.loads(value)
    except RecursionError:
        raise SkillFileError(f"{what} is nested too deeply") from None
    except ValueError:
        try:
            parsed = yaml.load(value, Loader=_Loader)
        except yaml.YAMLError:
            raise SkillFileError(f"{what} is a string but not valid JSON") from None
        except RecursionError:
            raise SkillFileError(f"{what} is nested too deeply") from None
    check_values(parsed, what)
    return parsed


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        value = _from_text(value, what) if value.strip() else {}
    if not isinstance(value, dict):
        raise SkillFileError(f"{what} must be a mapping, got {type(value).__name__}")
    return value


def _strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str | int | float) for v in value):
        raise SkillFileError(f"{what} must be a list of strings")
    return [str(v).strip() for v in value if str(v).strip()]


def _flag(value: Any, what: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no"):
        return value.strip().lower() in ("true", "yes")
    raise SkillFileError(f"{what} must be true or false")


def namespace_block(front: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The first of metadata.nanobot / .openclaw / .clawdbot present, with its key path."""
    metadata = _mapping(front.get("metadata"), "metadata")
    for key in NAMESPACES:
        if key in metadata:
            return f"metadata.{key}", _mapping(metadata[key], f"metadata.{key}")
    return "metadata", {}


def _text(front: dict[str, Any], key: str) -> str:
    value = front.get(key)
    if value is None:
        return ""
    if not isinstance(value, str | int | float):
        raise SkillFileError(f"'{key}' must be a string, got {type(value).__name__}")
    return str(value).strip()


def read_meta(front: dict[str, Any], folder_name: str) -> SkillMeta:
    """Validated metadata; SkillFileError with the reason when a key has the wrong shape."""
    name = _text(front, "name") or folder_name
    if len(name) > NAME_MAX or _BAD_NAME.search(name):
        rule = f"at most {NAME_MAX} chars, no / \\ < > & quotes"
        raise SkillFileError(f"invalid name {name!r}: {rule}")
    description = " ".join(_text(front, "description").split())
    if not description:
        raise SkillFileError("missing 'description' in frontmatter")
    where, block = namespace_block(front)
    requires = _mapping(block.get("requires"), f"{where}.requires")
    install = block.get("install") or []
    systems = _strings(block.get("os"), f"{where}.os")
    hidden = _flag(front.get("disable-model-invocation"), "disable-model-invocation")
    return SkillMeta(
        name=name,
        description=description[:DESCRIPTION_MAX],
        version=_text(front, "version") or str(block.get("version") or ""),
        emoji=str(block.get("emoji") or ""),
        always=_flag(block.get("always"), f"{where}.always"),
        bins=_strings(requires.get("bins"), f"{where}.requires.bins"),
        any_bins=_strings(requires.get("anyBins"), f"{where}.requires.anyBins"),
        env=_strings(requires.get("env"), f"{where}.requires.env"),
        os=[_OS_ALIASES.get(o.lower(), o.lower()) for o in systems],
        primary_env=str(block.get("primaryEnv") or ""),
        install=install if isinstance(install, list) else [install],
        model_invocable=not hidden,
        homepage=_text(front, "homepage") or str(block.get("homepage") or ""),
    )
