"""The model keys file (CRAYFISH_MODEL_KEYS_FILE): dotenv lines `NAME=value` that a preset's
`api_key_env` names are looked up in before the environment. A process's environment cannot
change while it runs; this file can: it is looked at (one stat, at most once a second) before a
request picks a key, and re-read when it changed, so an added, rotated or removed key serves the
next request. A broken edit is logged once and the last good keys stay in use.

Format, one key a line (blank lines and `#` comments skipped, `export ` allowed, a value may be
'single' or "double" quoted; no ${...} references):

    OPENAI_API_KEY=sk-...
    GROQ_KEY_1=gsk_...

The file must be a regular file only its owner can read (mode 0600 or 0400), outside the
workspace (which sandboxed commands read and write); every fault is a KeyFileError naming the
file and, for a line, its number, never a value (nor any part of a broken line)."""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from crayfish_common.private_file import PrivateFileError, read_private_text

from orchestrator.agent.presets import ModelPreset, Presets, rekeyed

log = logging.getLogger(__name__)

VARIABLE = "CRAYFISH_MODEL_KEYS_FILE"
LINE = re.compile(r"(?:export\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*=(?P<value>.*)")
MAX_FILE_BYTES = 64 * 1024
CHECK_EVERY = 1.0  # seconds between two looks at the file


class KeyFileError(ValueError):
    """The keys file cannot be used; str() is the one line to show."""


def file_state(path: Path) -> tuple[int, ...] | None:
    """What changes when the file is edited or replaced (None: it cannot be looked at)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def read_key_file(path: Path, workspace: Path) -> dict[str, str]:
    """The keys of the file at path by name; KeyFileError naming the fault."""
    where = f"{VARIABLE} ({path})"
    inside = workspace.resolve()
    if any(p == inside or p.is_relative_to(inside) for p in (path.absolute(), path.resolve())):
        raise KeyFileError(f"{where}: it is inside the workspace, where commands can read it")
    keys: dict[str, str] = {}
    for number, line in enumerate(_private_text(path, where).splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            name, value = _parse(stripped)
        except KeyFileError as exc:
            raise KeyFileError(f"{where} line {number}: {exc}") from None
        if name in keys:
            raise KeyFileError(f"{where} line {number}: {name} is set twice")
        keys[name] = value
    return keys


def _parse(line: str) -> tuple[str, str]:
    found = LINE.fullmatch(line)
    if found is None:  # nothing of the line is shown: it may be a key pasted alone
        raise KeyFileError("expected NAME=value")
    name, raw = found["name"], found["value"].strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        raw = raw[1:-1]
    elif raw[:1] in ("'", '"'):
        raise KeyFileError(f"{name}: the value's quote is not closed")
    if not raw:
        raise KeyFileError(f"{name} has an empty value (remove the line instead)")
    if any(c.isspace() or c == "\0" for c in raw):
        raise KeyFileError(f"{name}: a key holds no spaces or control characters")
    return name, raw


def _private_text(path: Path, where: str) -> str:
    """The file's text, if it is a regular file that only its owner can read."""
    try:
        return read_private_text(path, MAX_FILE_BYTES)
    except PrivateFileError as exc:
        raise KeyFileError(f"{where}: {exc}") from None


class ModelKeys:
    """The presets with the keys in use now: the file's (when there is one), else the
    environment's as it was at start. `current()` answers from memory but for one stat a second,
    and a re-read when the file changed."""

    def __init__(
        self,
        presets: Presets,
        path: Path | None,
        workspace: Path,
        environ: Mapping[str, str],
        state: tuple[int, ...] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.path = path
        self.workspace = workspace
        self.clock = clock
        self._environ = dict(environ)  # only the variables the presets name
        self._template = presets
        self._presets = presets
        self._state = state  # the file's when it was read (first_read)
        self._checked = clock()

    @staticmethod
    def first_read(
        path: Path | None, workspace: Path
    ) -> tuple[dict[str, str], tuple[int, ...] | None]:
        """The file's keys at start, and its state before reading (so an edit meanwhile is
        seen); KeyFileError for a file that cannot be used."""
        if path is None:
            return {}, None
        state = file_state(path)
        return read_key_file(path, workspace), state

    def current(self) -> Presets:
        """The presets with their keys as the file says now (the last good version of it)."""
        if self.path is None or self.clock() - self._checked < CHECK_EVERY:
            return self._presets
        self._checked = self.clock()
        state = file_state(self.path)
        if state == self._state:
            return self._presets
        self._state = state  # a broken version is logged once, not once a second
        try:
            presets = rekeyed(
                self._template, {**self._environ, **read_key_file(self.path, self.workspace)}
            )
        except ValueError as exc:
            log.warning("%s; the keys read before stay in use", exc)
            return self._presets
        before = self._presets.by_name
        changed = [p.name for p in presets.by_name.values() if _keyed(p) != _keyed(before[p.name])]
        if changed:
            log.info("%s was re-read: new keys for %s", VARIABLE, ", ".join(changed))
            self._presets = presets
        return self._presets


def _keyed(preset: ModelPreset) -> tuple[tuple[str, str], ...]:
    return tuple(zip(preset.key_names, preset.keys, strict=True))
