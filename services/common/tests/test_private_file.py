"""An operator's private file: read only when it is a regular file its owner alone can read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from crayfish_common.private_file import PrivateFileError, read_private_text


def test_a_private_file_is_read_and_a_readable_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "keys.env"
    path.write_text("KEY=sk-value\n")
    path.chmod(0o600)
    assert read_private_text(path, 100) == "KEY=sk-value\n"
    path.chmod(0o644)
    with pytest.raises(PrivateFileError, match="mode 0644; it must be 0600 or 0400"):
        read_private_text(path, 100)


def test_a_fifo_in_its_place_is_refused_without_blocking(tmp_path: Path) -> None:
    # With a plain open() this call waits forever for a writer (pytest's timeout would end it).
    path = tmp_path / "keys.env"
    os.mkfifo(path, 0o600)
    with pytest.raises(PrivateFileError, match="not a regular file"):
        read_private_text(path, 100)


@pytest.mark.parametrize(
    ("content", "why"),
    [(b"x" * 101, "larger than 100 bytes"), (b"\xff\xfe", "not UTF-8 text")],
)
def test_a_large_or_binary_file_is_refused(tmp_path: Path, content: bytes, why: str) -> None:
    path = tmp_path / "keys.env"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(PrivateFileError, match=why):
        read_private_text(path, 100)


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(PrivateFileError, match="cannot read it"):
        read_private_text(tmp_path / "absent.env", 100)
