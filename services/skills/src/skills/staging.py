"""Writing a skill into staging within limits: safe names, links made last and checked inside.

Folders are copied here, not with shutil.copytree: it opens each path by name (a file swapped for
a link meanwhile is followed) and knows no limits; here each file is opened beneath SafeRoot.
"""

from __future__ import annotations

import io
import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from crayfish_common.safe_files import FileRefused, SafeRoot

from skills.tree import join, walk

_DRIVE = re.compile(r"^[A-Za-z]:")
CHUNK = 64 * 1024
# Longest symlink target accepted (Linux's PATH_MAX).
MAX_LINK_TARGET = 4096


class Rejected(Exception):
    """The archive or folder is refused; the message says why."""


@dataclass(frozen=True)
class Limits:
    max_archive_bytes: int = 20 * 1024 * 1024
    max_total_bytes: int = 50 * 1024 * 1024
    max_file_bytes: int = 10 * 1024 * 1024
    max_files: int = 1000

    @property
    def max_members(self) -> int:
        """Entries an archive may list in all, directories and skipped macOS junk included."""
        return 4 * self.max_files


def shown(name: str) -> str:
    """A name from an archive or folder, safe to put in a message (no undecodable bytes)."""
    text = name.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= 200 else text[:200] + "..."


def member_path(name: str) -> PurePosixPath | None:
    """A safe relative path for an entry, None for entries to skip (root, macOS junk)."""
    if "\\" in name:
        raise Rejected(f"entry '{shown(name)}': backslash in path")
    if name.startswith("/") or _DRIVE.match(name):
        raise Rejected(f"entry '{shown(name)}': absolute path")
    if "\x00" in name or not _is_utf8(name):
        raise Rejected(f"entry '{shown(name)}': the name is not valid UTF-8 text")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Rejected(f"entry '{shown(name)}': path traversal ('..')")
    if not parts or parts[0] == "__MACOSX" or parts[-1] == ".DS_Store":
        return None
    return PurePosixPath(*parts)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class StagingWriter:
    """Writes entries under `dest` within limits; symlinks are made last and must stay inside."""

    def __init__(self, dest: Path, limits: Limits):
        self.dest = dest
        self.limits = limits
        self.files = 0
        self.total = 0
        self.links: list[tuple[PurePosixPath, str]] = []
        dest.mkdir(parents=True)

    def _count(self, rel: PurePosixPath) -> None:
        self.files += 1
        if self.files > self.limits.max_files:
            raise Rejected(f"too many files (limit {self.limits.max_files})")

    def add_dir(self, rel: PurePosixPath) -> None:
        try:
            (self.dest / rel).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise Rejected(
                f"entry '{rel}/': conflicts with another entry ({exc.strerror})"
            ) from None

    def add_file(self, rel: PurePosixPath, stream: IO[bytes], size: int, executable: bool) -> None:
        self._count(rel)
        if size > self.limits.max_file_bytes:
            raise Rejected(
                f"file '{rel}' is too large: {size} bytes (limit {self.limits.max_file_bytes})"
            )
        target = self.dest / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("xb") as out:
                self._copy(rel, stream, out)
        except OSError as exc:
            raise Rejected(f"entry '{rel}': cannot be written ({exc.strerror})") from None
        target.chmod(0o755 if executable else 0o644)

    def _copy(self, rel: PurePosixPath, stream: IO[bytes], out: IO[bytes]) -> None:
        written = 0
        while chunk := stream.read(CHUNK):
            written += len(chunk)
            self.total += len(chunk)
            if written > self.limits.max_file_bytes:
                raise Rejected(
                    f"file '{rel}' is too large (limit {self.limits.max_file_bytes} bytes)"
                )
            if self.total > self.limits.max_total_bytes:
                raise Rejected(f"contents too large (limit {self.limits.max_total_bytes} bytes)")
            out.write(chunk)

    def add_link(self, rel: PurePosixPath, target: str) -> None:
        self._count(rel)
        if "\x00" in target or not _is_utf8(target) or len(target) > MAX_LINK_TARGET:
            raise Rejected(f"symlink '{rel}': its target is not a valid path")
        if target.startswith("/") or _DRIVE.match(target) or not target:
            raise Rejected(f"symlink '{rel}' points outside the skill (to '{shown(target)}')")
        resolved = posixpath.normpath(posixpath.join(str(rel.parent), target))
        if resolved == ".." or resolved.startswith("../"):
            raise Rejected(f"symlink '{rel}' points outside the skill (to '{shown(target)}')")
        self.links.append((rel, target))

    def finish(self) -> None:
        """Creates the symlinks, then checks every one really resolves inside."""
        root = self.dest.resolve()
        for rel, target in self.links:
            try:
                (self.dest / rel).parent.mkdir(parents=True, exist_ok=True)
                os.symlink(target, self.dest / rel)
            except OSError as exc:
                raise Rejected(f"symlink '{rel}': cannot be created ({exc.strerror})") from None
        for rel, target in self.links:
            try:
                inside = (self.dest / rel).resolve().is_relative_to(root)
            except (OSError, RuntimeError):
                raise Rejected(
                    f"symlink '{rel}' is part of a loop (to '{shown(target)}')"
                ) from None
            if not inside:
                raise Rejected(f"symlink '{rel}' points outside the skill (to '{shown(target)}')")


def copy_folder(base: SafeRoot, folder: str, dest: Path, limits: Limits) -> None:
    """Copies a folder (`folder` beneath `base`) into `dest` with the same checks as an archive.

    Nothing is read from outside `base`: the walk never follows a link, and each file is
    opened beneath it and must be a regular file when opened (not when listed)."""
    writer = StagingWriter(dest, limits)
    try:
        nodes = walk(base, folder, limits.max_members)
    except FileRefused as exc:
        raise Rejected(str(exc)) from None
    for node in nodes:
        rel = member_path(node.rel)
        if rel is None:
            continue
        if node.kind == "link":
            writer.add_link(rel, node.target)
        elif node.kind == "dir":
            writer.add_dir(rel)
        elif node.kind == "file":
            try:
                data = base.read_bytes(join(folder, node.rel), limits.max_file_bytes)
            except FileRefused as exc:
                if exc.kind == "too_large":
                    limit = limits.max_file_bytes
                    raise Rejected(f"file '{rel}' is too large (limit {limit} bytes)") from None
                raise Rejected(f"'{rel}': {exc}") from None
            writer.add_file(rel, io.BytesIO(data), len(data), bool(node.mode & 0o111))
        else:
            raise Rejected(f"'{rel}' is a special file (device, socket or FIFO)")
    writer.finish()


def check_links(root: Path) -> None:
    """Refuses a symlink under `root` that resolves outside it. The writer checks links against
    the archive's top, but the skill may be one folder down: `s/a -> ../x` stays in the top."""
    real = root.resolve()
    for node in walk(SafeRoot(root, label="skill folder")):
        if node.kind != "link":
            continue
        try:
            inside = (root / node.rel).resolve().is_relative_to(real)
        except (OSError, RuntimeError):
            inside = False
        if not inside:
            target = shown(node.target)
            raise Rejected(f"symlink '{node.rel}' points outside the skill (to '{target}')")
