"""The catalog: scans workspace, managed and builtin skill folders, applies precedence, gates."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from crayfish_common.safe_files import FileRefused, SafeRoot

from skills import risk
from skills.frontmatter import SkillFileError, read_skill_file, refusal_reason
from skills.gating import SandboxView, missing_requirements
from skills.metadata import read_meta
from skills.model import RECORD_FILE, Diagnostic, Entry, SkillDoc, SkillPlace, Snapshot
from skills.tree import join

log = logging.getLogger(__name__)
StatKey = tuple[int, int, int, int]
MAX_RECORD_BYTES = 1 << 20


@dataclass(frozen=True)
class SkillRoot:
    """A folder of skill folders. Its content is read beneath `beneath` (default: the folder
    itself): links, `..` and folders swapped for links never lead a read outside it."""

    source: str
    folder: Path
    beneath: Path | None = None

    def safe_root(self) -> tuple[SafeRoot, str]:
        """The SafeRoot reads go through, and this folder relative to it."""
        anchor = self.beneath or self.folder
        label = "workspace" if self.source == "workspace" else f"{self.source} skills folder"
        return SafeRoot(anchor, label=label), self.folder.relative_to(anchor).as_posix()


def folder_entries(base: SafeRoot, rel: str) -> list[tuple[str, str, str]]:
    """(name, kind, link target) of a folder's entries in name order; kind is "dir",
    "dir-link" (a symbolic link to a folder), or "other". FileRefused if it cannot be listed."""
    found = []
    with base.open(rel, os.O_RDONLY | os.O_DIRECTORY) as fd:
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.is_symlink():
                    kind = "dir-link" if entry.is_dir() else "other"
                    target = os.readlink(entry.name, dir_fd=fd) if kind == "dir-link" else ""
                    found.append((entry.name, kind, target))
                else:
                    found.append((entry.name, "dir" if entry.is_dir() else "other", ""))
    return sorted(found)


def _install_record(place: SkillPlace) -> dict | None:
    try:
        record = json.loads(place.base.read_bytes(place.file(RECORD_FILE), MAX_RECORD_BYTES))
    except (FileRefused, OSError, ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


def load_doc(source: str, place: SkillPlace, max_bytes: int) -> SkillDoc:
    """Parses a skill folder's SKILL.md into a SkillDoc; SkillFileError with the reason."""
    front, body, text = read_skill_file(place.base, place.file("SKILL.md"), max_bytes)
    meta = read_meta(front, place.path.name)
    record = _install_record(place) if source == "managed" else None
    warnings = risk.scan(text)
    if record is not None and isinstance(record.get("warnings"), list):
        # Every file was scanned at install time; the SKILL.md may have changed since.
        warnings = list(dict.fromkeys([str(w) for w in record["warnings"]] + warnings))
    return SkillDoc(
        meta=meta,
        path=place.path / "SKILL.md",
        source=source,
        body=body,
        warnings=warnings,
        record=record,
        digest=hashlib.sha256(text.encode()).hexdigest(),
        place=place,
    )


def _missing_file_reason(place: SkillPlace) -> str:
    try:
        with place.base.open(place.rel, os.O_RDONLY | os.O_DIRECTORY) as fd:
            names = set(os.listdir(fd))
    except (FileRefused, OSError):
        names = set()
    if names & {"skill.md", "Skill.md"}:
        return "the skill file must be named SKILL.md (upper case)"
    return "folder has no SKILL.md"


def _stat_key(place: SkillPlace) -> StatKey:
    """The SKILL.md's identity, from the file it resolves to beneath the root; FileRefused."""
    with place.base.open(place.file("SKILL.md"), os.O_PATH) as fd:
        st = os.fstat(fd)
    return st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino


class Catalog:
    """Skill folders in precedence order; re-parses only the files whose stat changed."""

    def __init__(self, roots: Sequence[SkillRoot | tuple[str, Path]], max_file_bytes: int):
        self.roots = [r if isinstance(r, SkillRoot) else SkillRoot(*r) for r in roots]
        self._bases = [root.safe_root() for root in self.roots]
        self.max_file_bytes = max_file_bytes
        self._parsed: dict[Path, tuple[StatKey, SkillDoc | Diagnostic]] = {}
        self._lock = threading.Lock()
        self.snapshot = Snapshot([], [], "", "")

    def refresh(
        self, bins: SandboxView, env: Mapping[str, str] | None = None, platform: str = sys.platform
    ) -> Snapshot:
        """Rescans every root and publishes a new snapshot."""
        with self._lock:
            docs, diagnostics = self._scan()
            env = os.environ if env is None else env
            self.snapshot = assemble(docs, diagnostics, bins, env, platform)
            return self.snapshot

    def _scan(self) -> tuple[list[SkillDoc], list[Diagnostic]]:
        docs: list[SkillDoc] = []
        diagnostics: list[Diagnostic] = []
        parsed: dict[Path, tuple[StatKey, SkillDoc | Diagnostic]] = {}
        for root, (base, rel) in zip(self.roots, self._bases, strict=True):
            try:
                entries = folder_entries(base, rel)
            except (FileRefused, OSError) as exc:
                if not os.path.lexists(root.folder):
                    continue
                reason = f"cannot list the {root.source} skills folder: {exc}"
                diagnostics.append(Diagnostic(str(root.folder), reason))
                continue
            for name, kind, target in entries:
                if name.startswith(".") or kind == "other":
                    continue
                folder = root.folder / name
                if kind == "dir-link":
                    diagnostics.append(Diagnostic(str(folder), _link_reason(root, target)))
                    continue
                item = self._item(root.source, SkillPlace(base, join(rel, name), folder), parsed)
                (docs if isinstance(item, SkillDoc) else diagnostics).append(item)  # type: ignore[arg-type]
        self._parsed = parsed
        return docs, diagnostics

    def _item(
        self,
        source: str,
        place: SkillPlace,
        parsed: dict[Path, tuple[StatKey, SkillDoc | Diagnostic]],
    ) -> SkillDoc | Diagnostic:
        try:
            key = _stat_key(place)
        except FileRefused as exc:
            if exc.kind == "missing":
                return Diagnostic(str(place.path), _missing_file_reason(place))
            reason = refusal_reason(exc, place.file("SKILL.md"))
            return Diagnostic(str(place.path / "SKILL.md"), reason)
        cached = self._parsed.get(place.path)
        if cached is None or cached[0] != key:
            cached = (key, self._load(source, place))
        parsed[place.path] = cached
        return cached[1]

    def _load(self, source: str, place: SkillPlace) -> SkillDoc | Diagnostic:
        try:
            return load_doc(source, place, self.max_file_bytes)
        except SkillFileError as exc:
            log.warning("skipping %s: %s", place.path / "SKILL.md", exc)
            return Diagnostic(str(place.path / "SKILL.md"), str(exc))


def _link_reason(root: SkillRoot, target: str) -> str:
    shown = target if len(target) <= 200 else target[:200] + "..."
    return (
        f"the skill folder is a symbolic link (to {shown}); refused: a skill folder must be a "
        f"real folder inside the {root.source} skills folder"
    )


def assemble(
    docs: list[SkillDoc],
    diagnostics: list[Diagnostic],
    bins: SandboxView,
    env: Mapping[str, str],
    platform: str,
) -> Snapshot:
    """Applies precedence (docs come in root order), gates the winners, computes the version."""
    copies: dict[str, list[SkillDoc]] = {}
    for doc in docs:
        same = copies.setdefault(doc.name, [])
        twin = next((c for c in same if c.source == doc.source), None)
        if twin is not None:
            reason = f"duplicate skill name '{doc.name}' in {doc.source} skills (kept {twin.path})"
            diagnostics.append(Diagnostic(str(doc.path), reason))
            continue
        same.append(doc)
    entries = []
    for name in sorted(copies):
        winner, *rest = copies[name]
        missing = missing_requirements(winner.meta, bins, env, platform)
        shadowed = [str(c.path) for c in rest]
        folder = bins.folder_of(winner.source, winner.folder.name)
        secrets = bins.secrets_of(winner.meta.name)
        entries.append(Entry(winner, not missing, missing, shadowed, folder, secrets))
    state = [[e.as_dict(), e.doc.digest] for e in entries]
    state.append([[d.path, d.reason] for d in diagnostics])
    state.append([bins.source])
    version = hashlib.sha256(json.dumps(state, default=str).encode()).hexdigest()[:16]
    return Snapshot(entries, diagnostics, version, bins.source, copies)
