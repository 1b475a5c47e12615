"""The catalog: scans workspace, managed and builtin skill folders, applies precedence, gates."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

from skills import risk
from skills.frontmatter import SkillFileError, read_skill_file
from skills.gating import SandboxView, missing_requirements
from skills.metadata import read_meta
from skills.model import RECORD_FILE, Diagnostic, Entry, SkillDoc, Snapshot

log = logging.getLogger(__name__)
StatKey = tuple[int, int, int, int]


def skill_folders(root: Path) -> Iterator[Path]:
    """Sub-folders of a skills root in name order; hidden ones (.staging, .git) skipped.

    A missing root yields nothing; one that cannot be listed raises OSError.
    """
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except FileNotFoundError:
        return
    for entry in entries:
        if not entry.name.startswith(".") and entry.is_dir():
            yield Path(entry.path)


def _install_record(folder: Path) -> dict | None:
    try:
        record = json.loads((folder / RECORD_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def load_doc(source: str, skill_file: Path, max_bytes: int) -> SkillDoc:
    """Parses one SKILL.md into a SkillDoc; SkillFileError with the reason when broken."""
    if not skill_file.resolve().is_relative_to(skill_file.parent.resolve()):
        raise SkillFileError("SKILL.md is a link to a file outside its skill folder")
    front, body, text = read_skill_file(skill_file, max_bytes)
    meta = read_meta(front, skill_file.parent.name)
    record = _install_record(skill_file.parent) if source == "managed" else None
    warnings = risk.scan(text)
    if record is not None and isinstance(record.get("warnings"), list):
        # Every file was scanned at install time; the SKILL.md may have changed since.
        warnings = list(dict.fromkeys([str(w) for w in record["warnings"]] + warnings))
    return SkillDoc(
        meta=meta,
        path=skill_file,
        source=source,
        body=body,
        warnings=warnings,
        record=record,
        digest=hashlib.sha256(text.encode()).hexdigest(),
    )


def _missing_file_reason(folder: Path) -> str:
    if (folder / "skill.md").exists() or (folder / "Skill.md").exists():
        return "the skill file must be named SKILL.md (upper case)"
    return "folder has no SKILL.md"


class Catalog:
    """Skill folders in precedence order; re-parses only the files whose stat changed."""

    def __init__(self, roots: list[tuple[str, Path]], max_file_bytes: int):
        self.roots = roots
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
        for source, root in self.roots:
            try:
                folders = list(skill_folders(root))
            except OSError as exc:
                reason = f"cannot list the {source} skills folder: {exc.strerror or exc}"
                diagnostics.append(Diagnostic(str(root), reason))
                continue
            for folder in folders:
                skill_file = folder / "SKILL.md"
                try:
                    st = skill_file.stat()
                except OSError:
                    diagnostics.append(Diagnostic(str(folder), _missing_file_reason(folder)))
                    continue
                key = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
                cached = self._parsed.get(skill_file)
                if cached is None or cached[0] != key:
                    cached = (key, self._load(source, skill_file))
                parsed[skill_file] = cached
                item = cached[1]
                (docs if isinstance(item, SkillDoc) else diagnostics).append(item)  # type: ignore[arg-type]
        self._parsed = parsed
        return docs, diagnostics

    def _load(self, source: str, skill_file: Path) -> SkillDoc | Diagnostic:
        try:
            return load_doc(source, skill_file, self.max_file_bytes)
        except SkillFileError as exc:
            log.warning("skipping %s: %s", skill_file, exc)
            return Diagnostic(str(skill_file), str(exc))


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
        entries.append(Entry(winner, not missing, missing, shadowed, folder))
    state = [[e.as_dict(), e.doc.digest] for e in entries]
    state.append([[d.path, d.reason] for d in diagnostics])
    state.append([bins.source])
    version = hashlib.sha256(json.dumps(state, default=str).encode()).hexdigest()[:16]
    return Snapshot(entries, diagnostics, version, bins.source, copies)
