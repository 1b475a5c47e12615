"""Start-up checks of the workspace: it exists, the sandbox uid can reach and write it."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from tool_runner.sandbox.base import SandboxUnavailable

log = logging.getLogger(__name__)


def check_traversable(folder: Path, uid: int, gid: int) -> None:
    """Every parent of folder must let uid pass (x bit), or bwrap cannot bind it."""
    for parent in [folder, *folder.parents]:
        info = parent.stat()
        if info.st_uid == uid:
            ok = bool(info.st_mode & stat.S_IXUSR)
        elif info.st_gid == gid:
            ok = bool(info.st_mode & stat.S_IXGRP)
        else:
            ok = bool(info.st_mode & stat.S_IXOTH)
        if not ok:
            raise SandboxUnavailable(
                f"the sandbox uid {uid} cannot traverse {parent} (mode "
                f"{stat.filemode(info.st_mode)}); move the workspace or chmod o+x {parent}"
            )


def chown_tree(root: Path, uid: int, gid: int) -> int:
    """Gives the sandbox uid every entry of the workspace (no symlink followed); returns count."""
    changed = 0
    for current, dirs, names in os.walk(root, followlinks=False):
        for name in [".", *dirs, *names]:
            path = os.path.join(current, name)
            info = os.lstat(path)
            if (info.st_uid, info.st_gid) == (uid, gid):
                continue
            if not stat.S_ISDIR(info.st_mode) and info.st_nlink > 1:
                # A hard link may be a file elsewhere on the host: never re-own it.
                log.warning("not re-owning hard-linked %s", path)
                continue
            os.lchown(path, uid, gid)
            changed += 1
    return changed


def prepare_workspace(root: Path, owner: tuple[int, int] | None, chown: bool) -> Path:
    """Creates the workspace if needed; as root, hands it to the sandbox uid."""
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()
    if owner is not None:
        check_traversable(root, *owner)
        if chown:
            changed = chown_tree(root, *owner)
            if changed:
                log.info("gave %d workspace entries to uid %d (sandbox)", changed, owner[0])
    return root
