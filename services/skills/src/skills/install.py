"""Installing skills into the managed folder: validate in staging, then one atomic rename."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crayfish_common.safe_files import FileRefused, SafeRoot

from skills import risk
from skills.archive import extract_archive
from skills.catalog import load_doc
from skills.frontmatter import SkillFileError
from skills.model import RECORD_FILE, SkillDoc, SkillPlace
from skills.staging import Limits, Rejected, check_links, copy_folder
from skills.tree import read_head, walk

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_SUFFIXES = re.compile(r"(\.tar\.gz|\.tgz|\.tar|\.zip)$", re.I)
SCAN_BYTES = 2 * 1024 * 1024
_BINARY_MAGIC = {b"\x7fELF": "ELF", b"\xcf\xfa\xed\xfe": "Mach-O", b"MZ": "Windows PE"}


class InstallError(Exception):
    """`kind` is "invalid", "exists" or "not_found"; the message is the precise reason."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind = kind


@dataclass
class Installed:
    doc: SkillDoc
    digest: str
    warnings: list[str] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)


def tree_digest(root: Path, max_file_bytes: int = 64 << 20) -> str:
    """sha256 over sorted (path, kind, content) of a folder; the install record is left out.

    Read through SafeRoot like everything else: links are hashed by their target, never
    followed."""
    base = SafeRoot(root, label="skill folder")
    digest = hashlib.sha256()
    for node in walk(base):
        if node.rel == RECORD_FILE:
            continue
        if node.kind == "link":
            digest.update(f"L {node.rel} -> {node.target}\n".encode())
        elif node.kind == "file":
            content = hashlib.sha256(base.read_bytes(node.rel, max_file_bytes)).hexdigest()
            digest.update(f"F {node.rel} {content}\n".encode())
    return "sha256:" + digest.hexdigest()


def scan_tree(root: Path) -> list[str]:
    """Risk warnings for every text file, and a warning for bundled executables."""
    base = SafeRoot(root, label="skill folder")
    warnings: list[str] = []
    for node in walk(base):
        if node.kind != "file" or node.rel.rsplit("/", 1)[-1] == RECORD_FILE:
            continue
        data, _ = read_head(base, node.rel, SCAN_BYTES)
        kind = next((k for magic, k in _BINARY_MAGIC.items() if data.startswith(magic)), None)
        if kind is not None:
            warnings.append(f"{node.rel}: bundles a {kind} executable")
            continue
        try:
            warnings += risk.scan(data.decode("utf-8"), node.rel)
        except UnicodeDecodeError:
            continue
    return warnings


def skill_root(top: Path) -> Path:
    """The folder holding SKILL.md: the top itself, or its one sub-folder."""
    if (top / "SKILL.md").is_file():
        return top
    entries = [p for p in top.iterdir() if not p.name.startswith(".")]
    if len(entries) == 1 and entries[0].is_dir() and (entries[0] / "SKILL.md").is_file():
        return entries[0]
    raise InstallError("invalid", "no SKILL.md at the top level or in a single top-level folder")


class Installer:
    """Installs and uninstalls managed skills; one at a time, each atomic."""

    def __init__(
        self,
        managed_dir: Path,
        state_dir: Path,
        limits: Limits,
        max_skill_bytes: int,
        workspace: Path | None = None,
    ):
        self.managed_dir = managed_dir
        self.staging_dir = state_dir / ".staging"
        self.limits = limits
        self.max_skill_bytes = max_skill_bytes
        # Folders inside it are read beneath it: sandboxed commands can swap any of them.
        self.workspace = workspace
        self._lock = threading.Lock()

    def install_archive(self, data: bytes, filename: str, replace: bool = False) -> Installed:
        stem = _SUFFIXES.sub("", Path(filename or "skill").name) or "skill"
        return self._install(
            lambda top: extract_archive(data, filename, top, self.limits),
            stem,
            f"archive:{Path(filename).name or 'upload'}",
            replace,
            folder_is_name=False,
        )

    def install_folder(self, folder: Path, replace: bool = False) -> Installed:
        if not folder.is_absolute():
            raise InstallError("invalid", f"folder path must be absolute: {folder}")
        if not folder.is_dir():
            raise InstallError("not_found", f"no such folder: {folder}")
        base, rel = self._anchor(folder)
        return self._install(
            lambda top: copy_folder(base, rel, top, self.limits),
            folder.name,
            f"folder:{folder}",
            replace,
            folder_is_name=True,
        )

    def _anchor(self, folder: Path) -> tuple[SafeRoot, str]:
        """The SafeRoot to read a source folder beneath, and the folder relative to it: the
        workspace for a folder in it (named directly or through a link), else the folder."""
        if self.workspace is not None:
            workspace = self.workspace.resolve()
            for candidate in (Path(os.path.normpath(folder)), folder.resolve()):
                if candidate.is_relative_to(workspace):
                    return SafeRoot(workspace), candidate.relative_to(workspace).as_posix()
        return SafeRoot(folder, label="source folder"), "."

    def _install(
        self,
        fill: Callable[[Path], None],
        stem: str,
        source: str,
        replace: bool,
        folder_is_name: bool,
    ) -> Installed:
        self.staging_dir.mkdir(parents=True, exist_ok=True)
        self.managed_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="install-", dir=self.staging_dir))
        try:
            top = staging / stem
            try:
                fill(top)
            except Rejected as exc:
                raise InstallError("invalid", str(exc)) from None
            root = skill_root(top)
            try:
                check_links(root)
            except (Rejected, FileRefused) as exc:
                raise InstallError("invalid", str(exc)) from None
            doc = self._validate(root, named_folder=folder_is_name or root != top)
            try:
                installed = self._stamp(root, doc, source)
            except FileRefused as exc:
                raise InstallError("invalid", f"cannot read the unpacked skill: {exc}") from None
            readable_by_all(root)
            with self._lock:
                self._move_in(root, doc.name, replace)
            folder = self.managed_dir / doc.name
            installed.doc.path = folder / "SKILL.md"
            installed.doc.place = SkillPlace(SafeRoot(self.managed_dir), doc.name, folder)
            return installed
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _validate(self, root: Path, named_folder: bool) -> SkillDoc:
        place = SkillPlace(SafeRoot(root, label="skill folder"), ".", root)
        try:
            doc = load_doc("managed", place, self.max_skill_bytes)
        except SkillFileError as exc:
            raise InstallError("invalid", f"invalid SKILL.md: {exc}") from None
        if named_folder and doc.name != root.name:
            raise InstallError(
                "invalid", f"name '{doc.name}' in SKILL.md does not match its folder '{root.name}'"
            )
        if not NAME_RE.match(doc.name):
            raise InstallError(
                "invalid", f"invalid skill name '{doc.name}': use letters, digits, '-' or '_'"
            )
        return doc

    def _stamp(self, root: Path, doc: SkillDoc, source: str) -> Installed:
        digest = tree_digest(root)
        warnings = scan_tree(root)
        record: dict[str, Any] = {
            "name": doc.name,
            "source": source,
            "digest": digest,
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "version": doc.meta.version,
            "warnings": warnings,
        }
        (root / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        doc.record = record
        doc.warnings = warnings
        return Installed(doc, digest, warnings, record)

    def _move_in(self, root: Path, name: str, replace: bool) -> None:
        target = self.managed_dir / name
        if not os.path.lexists(target):
            os.rename(root, target)
            return
        if not replace:
            raise InstallError("exists", f"skill '{name}' is already installed (set replace)")
        old = Path(tempfile.mkdtemp(prefix="old-", dir=self.staging_dir)) / name
        os.rename(target, old)
        try:
            os.rename(root, target)
        except OSError:
            os.rename(old, target)
            raise
        shutil.rmtree(old.parent, ignore_errors=True)

    def uninstall(self, name: str) -> Path:
        """Removes a managed skill; InstallError("not_found") when it isn't installed."""
        if not NAME_RE.match(name):
            raise InstallError("invalid", f"invalid skill name '{name}'")
        target = self.managed_dir / name
        with self._lock:
            if not target.is_dir() or target.is_symlink():
                raise InstallError("not_found", f"skill '{name}' is not installed")
            self.staging_dir.mkdir(parents=True, exist_ok=True)
            trash = Path(tempfile.mkdtemp(prefix="removed-", dir=self.staging_dir))
            os.rename(target, trash / name)
        shutil.rmtree(trash, ignore_errors=True)
        return target


def readable_by_all(root: Path) -> None:
    """Folders 0755 and the install record 0644 (files got 0644/0755 when written), so sandboxed
    commands, which run as another user, can read the skill and run its scripts."""
    root.chmod(0o755)
    for folder, dirs, _ in os.walk(root):
        for name in dirs:
            (Path(folder) / name).chmod(0o755)
    record = root / RECORD_FILE
    if record.exists():
        record.chmod(0o644)
