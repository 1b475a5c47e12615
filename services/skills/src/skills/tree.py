"""Reading a skill folder's tree through `SafeRoot`: a link-free walk and capped file reads.

Not os.fwalk: each folder here is opened beneath the root with openat2 (RESOLVE_BENEATH) and
the walk stops at an entry limit while it lists, not after.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from crayfish_common.safe_files import FileRefused, SafeRoot, require_regular

MAX_ENTRIES = 10_000


@dataclass(frozen=True)
class Node:
    """One entry of a walked folder; `rel` is relative to that folder (posix)."""

    rel: str
    kind: str  # "dir", "file", "link" or "special"
    mode: int
    target: str = ""  # a link's target, as written in the link


def join(folder: str, rel: str) -> str:
    """`rel` inside `folder`, both relative to a SafeRoot ("." is the root itself)."""
    if folder in ("", "."):
        return rel or "."
    return f"{folder}/{rel}" if rel and rel != "." else folder


def walk(base: SafeRoot, folder: str = ".", max_entries: int = MAX_ENTRIES) -> list[Node]:
    """Every entry under `folder`, beneath `base`, in path order; links are reported, never
    followed. FileRefused when a folder cannot be opened or there are over `max_entries`."""
    nodes: list[Node] = []
    pending = [""]
    while pending:
        sub = pending.pop()
        with base.open(join(folder, sub), os.O_RDONLY | os.O_DIRECTORY) as fd:
            with os.scandir(fd) as entries:
                for entry in entries:
                    rel = f"{sub}/{entry.name}" if sub else entry.name
                    node = _node(entry, rel, fd)
                    nodes.append(node)
                    if node.kind == "dir":
                        pending.append(rel)
                    if len(nodes) > max_entries:
                        raise FileRefused(f"{folder}: more than {max_entries} entries", "too_large")
    nodes.sort(key=lambda n: n.rel.split("/"))
    return nodes


def _node(entry: os.DirEntry, rel: str, dir_fd: int) -> Node:
    try:
        mode = entry.stat(follow_symlinks=False).st_mode
        target = os.readlink(entry.name, dir_fd=dir_fd) if stat.S_ISLNK(mode) else ""
    except OSError as exc:  # replaced or removed since the listing
        raise FileRefused(f"{rel}: changed while being read ({exc.strerror})", "error") from None
    if stat.S_ISLNK(mode):
        return Node(rel, "link", mode, target)
    if stat.S_ISDIR(mode):
        return Node(rel, "dir", mode)
    return Node(rel, "file" if stat.S_ISREG(mode) else "special", mode)


def read_head(base: SafeRoot, rel: str, limit: int) -> tuple[bytes, int]:
    """(at most `limit` bytes from the start, the file's size) of a regular file beneath
    `base`; FileRefused for links out, FIFOs, devices, folders and hard-linked files."""
    with base.open(rel, os.O_RDONLY) as fd:
        info = os.fstat(fd)
        require_regular(rel, info)
        os.set_blocking(fd, True)
        chunks, total = [], 0
        while total < limit and (chunk := os.read(fd, min(1 << 20, limit - total))):
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks), info.st_size
