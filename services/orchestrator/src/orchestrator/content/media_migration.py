"""Images earlier versions stored in the workspace's `media/`, moved once to the data folder.

Only a file whose bytes still have the hash its name says is moved: anything else there may have
been planted by a sandboxed command, and is left where it is (logged).
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from crayfish_common.safe_files import FileRefused, SafeRoot

from orchestrator.content.media import MEDIA_DIR, MediaStore, stored_digest, stored_files

log = logging.getLogger(__name__)

# Larger than any image CRAYFISH_IMAGE_MAX_BYTES lets in: one stored under an older, larger
# setting is moved too (and refused when read if it is over today's).
MOVE_MAX_BYTES = 256 * 1024 * 1024


def move_workspace_media(workspace: Path, store: MediaStore) -> tuple[int, int]:
    """Moves the store's images from `workspace/media/` to the store; (moved, left)."""
    old = SafeRoot(workspace)
    moved = left = 0
    for name, modified in _stored_names(old):
        path = f"{MEDIA_DIR}/{name}"
        try:
            done = _move(old, store, path, modified)
        except (FileRefused, OSError) as exc:  # never a reason not to start
            log.warning("workspace %s not moved to the data folder: %s", path, exc)
            done = False
        moved, left = (moved + 1, left) if done else (moved, left + 1)
    if moved or left:
        log.info(
            "media: %d image(s) moved from the workspace to %s, %d left in the workspace",
            moved,
            store.root.root / MEDIA_DIR,
            left,
        )
    return moved, left


def _move(old: SafeRoot, store: MediaStore, path: str, modified: float) -> bool:
    """Copies one image to the store and removes it from the workspace, if its bytes match."""
    data = old.read_bytes(path, MOVE_MAX_BYTES)
    if hashlib.sha256(data).hexdigest() != stored_digest(path):
        log.warning("workspace %s not moved: its bytes do not have its name's hash", path)
        return False
    store.root.root.mkdir(parents=True, exist_ok=True)
    store.root.write_atomic(path, data, len(data))
    os.utime(store.root.root / path, (modified, modified))  # pruning goes oldest first
    old.remove(path)
    return True


def _stored_names(root: SafeRoot) -> list[tuple[str, float]]:
    """(name, modified) of the regular files in root's media/ named as the store names them."""
    try:
        return [(name, info.st_mtime) for name, info in stored_files(root)]
    except (FileRefused, OSError) as exc:
        if not (isinstance(exc, FileRefused) and exc.kind == "missing"):
            log.warning("workspace media/ not moved: %s", exc)
        return []
