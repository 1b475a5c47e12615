"""A path that flips between a file and a link, as a sandboxed command racing a reader would."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

# One renameat2(RENAME_EXCHANGE) after another: each path is always there, and is the file or
# the link by turns, so a reader that checks a path and then opens it can be fooled.
FLIPPER = """
import ctypes, os, sys
exchange = ctypes.CDLL(None, use_errno=True).renameat2
one, other = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
while exchange(-100, one, -100, other, 2) == 0:  # AT_FDCWD, RENAME_EXCHANGE
    pass
sys.exit(f"renameat2: {os.strerror(ctypes.get_errno())}")
"""


@contextlib.contextmanager
def flipping(one: Path, other: Path) -> Iterator[None]:
    """Another process exchanges two paths over and over until the block ends."""
    process = subprocess.Popen([sys.executable, "-c", FLIPPER, str(one), str(other)])
    try:
        yield
        assert process.poll() is None, "the flipping process stopped early"
    finally:
        process.kill()
        process.wait()
