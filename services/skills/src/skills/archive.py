"""Unpacks skill archives (.zip, .tar.gz) into staging, refusing the unsafe before it inflates.

Not shutil.unpack_archive or tarfile's `data` filter: they judge a member once its header (a
pax record, a GNU long name) or body is already read; here sizes and counts are bounded first.
"""

from __future__ import annotations

import gzip
import io
import stat
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from skills.staging import MAX_LINK_TARGET, Limits, Rejected, StagingWriter, member_path, shown

# Largest tar header record (pax attributes, a GNU long name), which tarfile reads whole.
MAX_TAR_HEADER = 1 << 20
_HEADER_TYPES = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)
# What a damaged or hostile archive makes the zip, tar and gzip readers raise.
DAMAGED = (
    zipfile.BadZipFile,
    tarfile.TarError,
    zlib.error,
    struct.error,
    EOFError,
    OSError,
    ValueError,
    NotImplementedError,
    RuntimeError,
    OverflowError,
    LookupError,
)


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
    kind = archive_kind(data, filename)
    writer = StagingWriter(dest, limits)
    try:
        if kind == "zip":
            _from_zip(data, writer)
        else:
            _from_tar(data, writer)
    except Rejected:
        raise
    except DAMAGED as exc:
        detail = shown(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise Rejected(f"damaged {kind} archive ({detail})") from None
    writer.finish()


def _from_zip(data: bytes, writer: StagingWriter) -> None:
    # Each central directory entry becomes a ZipInfo: a 20 MB zip of tiny entries would take
    # ~170 MB before the first could be refused. Every entry starts with this signature.
    if data.count(b"PK\x01\x02") > writer.limits.max_members:
        raise Rejected(f"too many entries in the archive (limit {writer.limits.max_members})")
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
                writer.add_link(rel, _zip_link_target(archive, info, rel))
            elif info.is_dir():
                writer.add_dir(rel)
            elif stat.S_IFMT(mode) and not stat.S_ISREG(mode):
                raise Rejected(f"entry '{rel}' is a special file")
            else:
                with archive.open(info) as stream:
                    writer.add_file(rel, stream, info.file_size, bool(mode & 0o111))


def _zip_link_target(archive: zipfile.ZipFile, info: zipfile.ZipInfo, rel: PurePosixPath) -> str:
    """A symlink entry's target, refused by its declared size before a byte is inflated."""
    if info.file_size > MAX_LINK_TARGET:
        raise Rejected(
            f"symlink '{rel}': its target is {info.file_size} bytes (limit {MAX_LINK_TARGET})"
        )
    with archive.open(info) as stream:
        raw = stream.read(MAX_LINK_TARGET + 1)
    if len(raw) > MAX_LINK_TARGET:
        raise Rejected(f"symlink '{rel}': its target is over {MAX_LINK_TARGET} bytes")
    return raw.decode("utf-8", "replace")


class _Budget(io.RawIOBase):
    """A read-only stream that fails once more than `limit` bytes were read from it: tar
    headers (pax records, GNU long names) are read whole, before any entry can be refused."""

    def __init__(self, raw: io.BufferedIOBase, limit: int):
        self.raw = raw
        self.limit = limit
        self.used = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        room = self.limit - self.used + 1
        data = self.raw.read(room if size is None or size < 0 else min(size, room))
        self.used += len(data)
        if self.used > self.limit:
            raise Rejected(f"contents too large: over {self.limit} bytes unpacked")
        return data

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def, override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _CappedTarInfo(tarfile.TarInfo):
    """Refuses an oversized pax or GNU long-name record before tarfile reads it into memory."""

    def _proc_member(self, tarfile):  # type: ignore[no-untyped-def]  # tarfile's per-header hook
        if self.type in _HEADER_TYPES and self.size > MAX_TAR_HEADER:
            raise Rejected(f"a tar header record is {self.size} bytes (limit {MAX_TAR_HEADER})")
        return super()._proc_member(tarfile)  # type: ignore[misc]


def _from_tar(data: bytes, writer: StagingWriter) -> None:
    limits = writer.limits
    raw: io.BufferedIOBase = io.BytesIO(data)
    if data.startswith(b"\x1f\x8b"):
        raw = gzip.GzipFile(fileobj=raw, mode="rb")
    # Headers take 512 bytes, pax records a little more: this bounds what is ever inflated.
    budget = _Budget(raw, limits.max_total_bytes + limits.max_members * 2048 + (1 << 20))
    try:
        archive = tarfile.open(fileobj=budget, mode="r|", tarinfo=_CappedTarInfo)
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise Rejected(f"not a valid tar archive ({str(exc).splitlines()[0]})") from None
    with archive:
        declared = 0
        for count, member in enumerate(archive, start=1):
            if count > limits.max_members:
                raise Rejected(f"too many entries in the archive (limit {limits.max_members})")
            declared += max(member.size, 0)
            if declared > limits.max_total_bytes:
                raise Rejected(f"contents too large (limit {limits.max_total_bytes} bytes)")
            _tar_member(archive, member, writer)


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
