"""The catalog's data: parsed skills, catalog entries, diagnostics, snapshots."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crayfish_common.safe_files import SafeRoot

from skills.metadata import SkillMeta

SOURCES = ("workspace", "managed", "builtin")
RECORD_FILE = ".crayfish-install.json"


@dataclass(frozen=True)
class SkillPlace:
    """A skill folder: read at `rel` beneath `base` (nothing is read from outside `base`),
    shown as `path`."""

    base: SafeRoot
    rel: str
    path: Path

    def file(self, name: str) -> str:
        """`name` inside the folder, relative to `base`."""
        return name if self.rel in ("", ".") else f"{self.rel}/{name}"


@dataclass
class SkillDoc:
    """One parsed SKILL.md in one location."""

    meta: SkillMeta
    path: Path
    source: str
    body: str
    warnings: list[str] = field(default_factory=list)
    record: dict[str, Any] | None = None
    # sha256 of the file's text: a body edit changes the catalog version too.
    digest: str = ""
    # Where its files are read from (resources, the install record).
    place: SkillPlace | None = None

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def where(self) -> SkillPlace:
        """Its place; a doc made without one is read beneath its own folder."""
        if self.place is None:
            return SkillPlace(SafeRoot(self.folder, label="skill folder"), ".", self.folder)
        return self.place


@dataclass(frozen=True)
class Diagnostic:
    """A file the catalog could not load, with the reason."""

    path: str
    reason: str


@dataclass
class Entry:
    """The winning copy of a skill, gated."""

    doc: SkillDoc
    available: bool
    missing: list[str]
    shadowed: list[str] = field(default_factory=list)
    # The folder as sandboxed commands see it ("" when the sandbox does not show it).
    sandbox_folder: str = ""
    # Secrets (names) its commands get only with exec's `skill` argument naming it.
    secrets: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.doc.name

    @property
    def shown_location(self) -> str:
        """The SKILL.md path to show the model: where its commands can reach it, if they can."""
        if self.sandbox_folder:
            return f"{self.sandbox_folder}/{self.doc.path.name}"
        return str(self.doc.path)

    def as_dict(self) -> dict[str, Any]:
        meta = self.doc.meta
        return {
            "name": meta.name,
            "description": meta.description,
            "location": str(self.doc.path),
            "source": self.doc.source,
            "available": self.available,
            "missing": self.missing,
            "emoji": meta.emoji,
            "always": meta.always,
            "version": meta.version,
            "shadowed": self.shadowed,
            "warnings": self.doc.warnings,
            "primary_env": meta.primary_env,
            "install": meta.install,
            "model_invocable": meta.model_invocable,
            "record": self.doc.record,
            "sandbox_folder": self.sandbox_folder,
            "secrets": self.secrets,
        }


@dataclass
class Snapshot:
    """One consistent view of the catalog; `version` changes whenever any part does."""

    entries: list[Entry]
    diagnostics: list[Diagnostic]
    version: str
    requirements_source: str
    copies: dict[str, list[SkillDoc]] = field(default_factory=dict)

    def get(self, name: str) -> Entry | None:
        for entry in self.entries:
            if entry.name == name:
                return entry
        return None

    def names(self) -> list[str]:
        return [entry.name for entry in self.entries]
