"""Reading a SKILL.md file: size and encoding checks, YAML frontmatter, Markdown body.

Not python-frontmatter: it reads a file without (or with unclosed) frontmatter as all body and
drops a non-mapping one, where the catalog must say why in a diagnostic; the split is 10 lines.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from crayfish_common.safe_files import FileRefused, SafeRoot

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FENCE = re.compile(r"^---[ \t]*$")
_END = re.compile(r"^(---|\.\.\.)[ \t]*$")
_SURROGATE = re.compile("[\ud800-\udfff]")
# Values in a frontmatter, counted as if aliases were copies: `&a [*a, *a]` nests double.
MAX_VALUES = 20_000


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
    check_values(data, "frontmatter")
    return {str(key): value for key, value in data.items()}


def check_values(data: Any, what: str) -> None:
    """Refuses what would break later steps: YAML aliases that expand too far or refer to
    themselves (JSON and str() of them never end), and strings that cannot be UTF-8 encoded."""
    pending, seen = [data], 0
    while pending:
        value = pending.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise SkillFileError(
                f"{what} holds over {MAX_VALUES} values (YAML aliases that repeat or refer to "
                "themselves?)"
            )
        if isinstance(value, dict):
            pending.extend(value.keys())
            pending.extend(value.values())
        elif isinstance(value, list | tuple | set):
            pending.extend(value)
        elif isinstance(value, str) and _SURROGATE.search(value):
            raise SkillFileError(f"{what} contains an invalid Unicode escape (a lone surrogate)")


def read_skill_file(base: SafeRoot, rel: str, max_bytes: int) -> tuple[dict[str, Any], str, str]:
    """(frontmatter, body, whole text) of the SKILL.md at `rel` beneath `base`, or
    SkillFileError with the reason: a link out of `base`, a FIFO or device, too large, broken."""
    try:
        data = base.read_bytes(rel, max_bytes)
    except FileRefused as exc:
        raise SkillFileError(refusal_reason(exc, rel)) from None
    except OSError as exc:
        raise SkillFileError(f"cannot read {rel}: {exc.strerror or exc}") from None
    text = decode(data)
    front, body, _ = split(text)
    return parse_yaml(front), body, text


def refusal_reason(exc: FileRefused, rel: str) -> str:
    """The reason a SKILL.md was not read, without the root-relative path the helper adds."""
    detail = str(exc).removeprefix(f"{rel}: ").removeprefix(f"{rel} ")
    if exc.kind == "too_large":
        return f"file too large: {detail}"
    joiner = " " if detail.startswith(("is ", "has ", "resolves ")) else ": "
    return f"SKILL.md{joiner}{detail}"
