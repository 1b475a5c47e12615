"""`crayfish memory log|show REV|restore REV`: the history of memory's files, a diff, a restore."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from crayfish_cli.api import CrayfishClient
from crayfish_cli.render import Style, use_colour

REVISION = re.compile(r"^[0-9a-fA-F]{4,40}$")


def _style() -> Style:
    return Style(use_colour(sys.stdout))


def _dump(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2))


def is_revision(name: str) -> bool:
    """A revision id or prefix: memory's paths (MEMORY.md, memory/...) are never bare hex."""
    return REVISION.match(name.strip()) is not None


def _line(revision: dict[str, Any]) -> str:
    s = _style()
    files = ", ".join(revision.get("files", []))
    when = str(revision.get("time", "")).replace("T", " ")[:19]
    return (
        f"{s.bold(str(revision['rev'])[:12])} {s.dim(when)} {revision.get('author', '')}"
        f"  {revision.get('reason', '')}  {s.dim(files)}"
    )


def log(client: CrayfishClient, limit: int, path: str, as_json: bool) -> int:
    revisions = client.memory_history(limit, path)
    if as_json:
        _dump(revisions)
        return 0
    if not revisions:
        print("no revisions yet")
    for revision in revisions:
        print(_line(revision))
    return 0


def show(client: CrayfishClient, rev: str, as_json: bool) -> int:
    shown = client.memory_revision(rev.strip())
    if as_json:
        _dump(shown)
        return 0
    print(_line(shown))
    s = _style()
    for line in str(shown.get("diff", "")).splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            line = s.green(line)
        elif line.startswith("-") and not line.startswith("---"):
            line = s.red(line)
        print(line)
    return 0


def restore(client: CrayfishClient, rev: str, reason: str, path: str, as_json: bool) -> int:
    done = client.memory_restore(rev.strip(), reason, path)
    if as_json:
        _dump(done)
        return 0
    made = done.get("revision")
    if made is None:
        print(f"the files already are as at {done['restored'][:12]}; nothing changed")
        return 0
    print(f"restored {done['restored'][:12]} as {made['rev'][:12]}: {', '.join(done['files'])}")
    return 0
