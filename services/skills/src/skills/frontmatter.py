"""Reading a SKILL.md file: size and encoding checks, YAML frontmatter, Markdown body."""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Any

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FENCE = re.compile(r"^---[ \t]*$")
_END = re.compile(r"^(---|\.\.\.)[ \t]*$")


class SkillFileError(Exception):
    """A SKILL.md that cannot be loaded; the message is the reason shown in diagnostics."""


def decode(data: bytes) -> str:
    """UTF-8 text (a BOM is dropped); a readable error for anything else."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise SkillFileError("file is UTF-16 encoded; save it as UTF-8")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillFileError(
            f"file is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    if "\x00" in text:
        raise SkillFileError("file contains NUL bytes (binary, not Markdown)")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def split(text: str) -> tuple[str, str, int]:
    """(frontmatter YAML, body, line number where the body starts)."""
    lines = text.split("\n")
    if not lines or not _FENCE.match(lines[0]):
        raise SkillFileError("no YAML frontmatter: the file must start with a '---' line")
    for index in range(1, len(lines)):
        if _END.match(lines[index]):
            body = "\n".join(lines[index + 1 :]).strip("\n")
            return "\n".join(lines[1:index]), body, index + 2
    raise SkillFileError("frontmatter is not closed: no second '---' line")


def parse_yaml(source: str) -> dict[str, Any]:
    """The frontmatter mapping; YAML errors become reasons with a line number."""
    try:
        data = yaml.load(source, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at frontmatter line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SkillFileError(f"invalid YAML in frontmatter{where}: {problem}") from None
    if data is None:
        raise SkillFileError("frontmatter is empty: it needs at least a description")
    if not isinstance(data, dict):
        raise SkillFileError(f"frontmatter is a {type(data).__name__}, not a mapping")
    return {str(key): value for key, value in data.items()}


def read_skill_file(path: Path, max_bytes: int) -> tuple[dict[str, Any], str, str]:
    """(frontmatter, body, whole text) of a SKILL.md, or SkillFileError with the reason."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise SkillFileError("not a regular file (FIFO, device or folder)")
        size = info.st_size
        if size > max_bytes:
            raise SkillFileError(f"file too large: {size} bytes (limit {max_bytes})")
        data = path.read_bytes()
    except OSError as exc:
        raise SkillFileError(f"cannot read file: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise SkillFileError(f"file too large: {len(data)} bytes (limit {max_bytes})")
    text = decode(data)
    front, body, _ = split(text)
    return parse_yaml(front), body, text
