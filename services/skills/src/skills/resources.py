"""A skill's resource files (scripts/, references/, templates/, assets/): listing and safe reads."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from crayfish_common.safe_files import FileRefused

from skills.model import RECORD_FILE, SkillPlace
from skills.tree import read_head

RESOURCE_DIRS = ("scripts", "references", "templates", "assets")
MAX_LISTED = 200
_DRIVE = re.compile(r"^[A-Za-z]:")


class ResourceError(Exception):
    """A resource that cannot be read; `kind` is "invalid" or "not_found"."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind = kind


def list_resources(place: SkillPlace) -> list[str]:
    """Regular files under the resource folders, relative to the skill folder, sorted; links,
    FIFOs and devices are left out (the walk never follows a link)."""
    found: list[str] = []
    prefix = "" if place.rel in ("", ".") else place.rel + "/"
    for top in RESOURCE_DIRS:
        try:
            files = place.base.files(place.file(top), limit=MAX_LISTED)
        except FileRefused:
            continue  # a resource folder that is a link out, or not a folder
        for rel in files:
            rel = rel.removeprefix(prefix)
            parts = rel.split("/")
            if parts[-1] != RECORD_FILE and not any(p.startswith(".") for p in parts):
                found.append(rel)
        if len(found) >= MAX_LISTED:
            break
    return found[:MAX_LISTED]


def _checked_path(rel: str) -> str:
    rel = rel.strip().replace("\\", "/")
    if rel.startswith("/") or _DRIVE.match(rel):
        raise ResourceError("invalid", f"'{rel}' is absolute; give a path inside the skill folder")
    parts = PurePosixPath(rel).parts
    if ".." in parts:
        raise ResourceError("invalid", f"'{rel}' leaves the skill folder")
    if not parts or parts[0] not in RESOURCE_DIRS:
        allowed = ", ".join(f"{d}/" for d in RESOURCE_DIRS)
        raise ResourceError("invalid", f"'{rel}' is not a resource; resources live under {allowed}")
    return "/".join(parts)


def read_resource(place: SkillPlace, rel: str, max_chars: int) -> tuple[str, bool]:
    """(text, truncated) of one resource file; ResourceError with a readable reason.

    Read beneath the skill's root: a link to another file there works, a link leaving it, a
    FIFO or a device is refused without being read."""
    checked = _checked_path(rel)
    try:
        data, size = read_head(place.base, place.file(checked), max_chars * 4 + 4)
    except FileRefused as exc:
        if exc.kind == "missing":
            listing = ", ".join(list_resources(place)) or "none"
            raise ResourceError("not_found", f"no resource '{rel}'. Resources: {listing}") from None
        raise ResourceError("invalid", f"'{rel}': {_reason(exc, place.file(checked))}") from None
    except OSError as exc:
        raise ResourceError("invalid", f"'{rel}' cannot be read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(data) - 4:
            raise ResourceError("invalid", f"'{rel}' is a binary file ({size} bytes)") from None
        text = data[: exc.start].decode("utf-8")
    if "\x00" in text:
        raise ResourceError("invalid", f"'{rel}' is a binary file")
    if len(text) > max_chars or len(data) > max_chars * 4:
        return text[:max_chars] + f"\n[... truncated at {max_chars} characters]", True
    return text, False


def _reason(exc: FileRefused, shown: str) -> str:
    """The refusal without the root-relative path the helper puts first."""
    return str(exc).removeprefix(f"{shown}: ").removeprefix(f"{shown} ")
