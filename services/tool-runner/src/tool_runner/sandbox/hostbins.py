"""Executables found on a list of folders (the sandbox PATH), for skill gating."""

from __future__ import annotations

import os


def list_bins(folders: list[str]) -> list[str]:
    """Sorted, de-duplicated names of executable files in folders (folders seen once)."""
    names: set[str] = set()
    seen: set[str] = set()
    for folder in folders:
        real = os.path.realpath(folder)
        if real in seen or not os.path.isdir(real):
            continue
        seen.add(real)
        with os.scandir(real) as entries:
            for entry in entries:
                try:
                    if entry.is_file() and os.access(entry.path, os.X_OK):
                        names.add(entry.name)
                except OSError:
                    continue
    return sorted(names)
