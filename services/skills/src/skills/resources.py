"""A skill's resource files (scripts/, references/, templates/, assets/): listing and safe reads."""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from skills.model import RECORD_FILE

RESOURCE_DIRS = ("scripts", "references", "templates", "assets")
MAX_LISTED = 200
_DRIVE = re.compile(r"^[A-Za-z]:")


class ResourceError(Exception):
    """A resource that cannot be read; `kind` is "invalid" or "not_found"."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind = kind


def list_resources(folder: Path) -> list[str]:
    """Files under the resource folders, relative to the skill folder, sorted."""
    found: list[str] = []
    for top in RESOURCE_DIRS:
        base = folder / top
        if not base.is_dir() or base.is_symlink():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name != RECORD_FILE and not name.startswith("."):
                    found.append(str(Path(dirpath, name).relative_to(folder).as_posix()))
        if len(found) >= MAX_LISTED:
            break
    return found[:MAX_LISTED]


def _checked_path(folder: Path, rel: str) -> Path:
    rel = rel.strip().replace("\\", "/")
    if rel.startswith("/") or _DRIVE.match(rel):
        raise ResourceError("invalid", f"'{rel}' is absolute; give a path inside the skill folder")
    parts = PurePosixPath(rel).parts
    if ".." in parts:
        raise ResourceError("invalid", f"'{rel}' leaves the skill folder")
    if not parts or parts[0] not in RESOURCE_DIRS:
        allowed = ", ".join(f"{d}/" for d in RESOURCE_DIRS)
        raise ResourceError("invalid", f"'{rel}' is not a resource; resources live under {allowed}")
    target = folder.joinpath(*parts)
    root = folder.resolve()
    if not target.resolve().is_relative_to(root):
        raise ResourceError("invalid", f"'{rel}' is a link that leaves the skill folder")
    return target


def read_resource(folder: Path, rel: str, max_chars: int) -> tuple[str, bool]:
    """(text, truncated) of one resource file; ResourceError with a readable reason."""
    target = _checked_path(folder, rel)
    if not target.exists():
        listing = ", ".join(list_resources(folder)) or "none"
        raise ResourceError("not_found", f"no resource '{rel}'. Resources: {listing}")
    if not target.is_file():
        raise ResourceError("invalid", f"'{rel}' is not a regular file")
    with target.open("rb") as handle:
        data = handle.read(max_chars * 4 + 4)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(data) - 4:
            size = target.stat().st_size
            raise ResourceError("invalid", f"'{rel}' is a binary file ({size} bytes)") from None
        text = data[: exc.start].decode("utf-8")
    if "\x00" in text:
        raise ResourceError("invalid", f"'{rel}' is a binary file")
    if len(text) > max_chars or len(data) > max_chars * 4:
        return text[:max_chars] + f"\n[... truncated at {max_chars} characters]", True
    return text, False
