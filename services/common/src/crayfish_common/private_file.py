"""An operator's private file (keys, secrets): read only if the file opened is a regular file
that its owner alone can read, checked on the open file itself (no swap between check and read,
and a FIFO put in its place does not block the reader)."""

from __future__ import annotations

import os
import stat
from pathlib import Path


class PrivateFileError(Exception):
    """Why the file cannot be used (never any of its content)."""


def read_private_text(path: Path, max_bytes: int) -> str:
    """The file's UTF-8 text; PrivateFileError when it is not a regular file, others may read
    it, it is larger than `max_bytes`, unreadable or not UTF-8."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise PrivateFileError(f"cannot read it ({exc.strerror})") from None
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise PrivateFileError("not a regular file")
        if info.st_mode & 0o077:
            mode = stat.S_IMODE(info.st_mode)
            raise PrivateFileError(f"mode {mode:04o}; it must be 0600 or 0400 (chmod 600 {path})")
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise PrivateFileError(f"cannot read it ({exc.strerror})") from None
    if len(data) > max_bytes:
        raise PrivateFileError(f"larger than {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PrivateFileError("not UTF-8 text") from None
