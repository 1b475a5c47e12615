"""Unpacks skill archives (.zip, .tar.gz) and copies folders into staging, refusing the unsafe."""

from __future__ import annotations

import io
import os
import posixpath
import re
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

_DRIVE = re.compile(r"^[A-Za-z]:")
CHUNK = 64 * 1024


class Rejected(Exception):
    """The archive or folder is refused; the message says why."""


@dataclass(frozen=True)
class Limits:
    max_archive_bytes: int = 20 * 1024 * 1024
    max_total_bytes: int = 50 * 1024 * 1024
    max_file_bytes: int = 10 * 1024 * 1024
    max_files: int = 1000


def member_path(name: str) -> PurePosixPath | None:
    """A safe relative path for an entry, None for entries to skip (root, macOS junk)."""
    if "\\" in name:
        raise Rejected(f"entry '{name}': backslash in path")
    if name.startswith("/") or _DRIVE.match(name):
        raise Rejected(f"entry '{name}': absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Rejected(f"entry '{name}': path traversal ('..')")
    if not parts or parts[0] == "__MACOSX" or parts[-1] == ".DS_Store":
        return None
    return PurePosixPath(*parts)


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
        if target.startswith("/") or _DRIVE.match(target) or not target:
            raise Rejected(f"symlink '{rel}' points outside the skill (to '{target}')")
        resolved = posixpath.normpath(posixpath.join(str(rel.parent), target))
        if resolved == ".." or resolved.startswith("../"):
            raise Rejected(f"symlink '{rel}' points outside the skill (to '{target}')")
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
            if not (self.dest / rel).resolve().is_relative_to(root):
                raise Rejected(f"symlink '{rel}' points outside the skill (to '{target}')")


def archive_kind(data: bytes, filename: str) -> str:
    """By content first (an upload's name may lie), then by name."""
    if data.startswith(b"PK\x03\x04") or (filename.lower().endswith(".zip") and data[:2] == b"PK"):
        return "zip"
    if data.startswith(b"\x1f\x8b") or data[257:262] == b"ustar":
        return "tar"
    raise Rejected("not a .zip or .tar.gz archive")


def extract_archive(data: bytes, filename: str, dest: Path, limits: Limits) -> None:
    """Unpacks into `dest` (created); Rejected with the reason for anything unsafe."""
    if len(data) > limits.max_archive_bytes:
        raise Rejected(f"archive too large: {len(data)} bytes (limit {limits.max_archive_bytes})")
    writer = StagingWriter(dest, limits)
    if archive_kind(data, filename) == "zip":
        _from_zip(data, writer)
    else:
        _from_tar(data, writer)
    writer.finish()


def _from_zip(data: bytes, writer: StagingWriter) -> None:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise Rejected(f"not a valid zip archive ({exc})") from None
    with archive:
        for info in archive.infolist():
            rel = member_path(info.filename)
            if rel is None:
                continue
            if info.flag_bits & 0x1:
                raise Rejected(f"entry '{rel}' is encrypted")
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                target = archive.read(info)[:4096].decode("utf-8", "replace")
                writer.add_link(rel, target)
            elif info.is_dir():
                writer.add_dir(rel)
            elif stat.S_IFMT(mode) and not stat.S_ISREG(mode):
                raise Rejected(f"entry '{rel}' is a special file")
            else:
                with archive.open(info) as stream:
                    writer.add_file(rel, stream, info.file_size, bool(mode & 0o111))


def _from_tar(data: bytes, writer: StagingWriter) -> None:
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise Rejected(f"not a valid tar archive ({str(exc).splitlines()[0]})") from None
    with archive:
        try:
            for member in archive:
                _tar_member(archive, member, writer)
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise Rejected(f"damaged tar archive ({exc})") from None


def _tar_member(archive: tarfile.TarFile, member: tarfile.TarInfo, writer: StagingWriter) -> None:
    rel = member_path(member.name)
    if rel is None:
        return
    if member.issym():
        writer.add_link(rel, member.linkname)
    elif member.islnk():
        raise Rejected(f"entry '{rel}' is a hard link")
    elif member.isdir():
        writer.add_dir(rel)
    elif member.isreg():
        if member.size > writer.limits.max_file_bytes:
            limit = writer.limits.max_file_bytes
            raise Rejected(f"file '{rel}' is too large: {member.size} bytes (limit {limit})")
        stream = archive.extractfile(member)
        assert stream is not None
        writer.add_file(rel, stream, member.size, bool(member.mode & 0o111))
    else:
        raise Rejected(f"entry '{rel}' is a special file (device or FIFO)")


def copy_folder(source: Path, dest: Path, limits: Limits) -> None:
    """Copies a folder into `dest` with the same checks as an archive."""
    writer = StagingWriter(dest, limits)
    for dirpath, dirnames, filenames in os.walk(source):
        base = Path(dirpath)
        for name in sorted(dirnames + filenames):
            path = base / name
            rel = PurePosixPath(path.relative_to(source).as_posix())
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                writer.add_link(rel, os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                writer.add_dir(rel)
            elif stat.S_ISREG(info.st_mode):
                with path.open("rb") as stream:
                    writer.add_file(rel, stream, info.st_size, bool(info.st_mode & 0o111))
            else:
                raise Rejected(f"'{rel}' is a special file (device, socket or FIFO)")
    writer.finish()
