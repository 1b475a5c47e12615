"""Long answers in pieces a platform accepts: split at its limit on paragraph boundaries, then
lines, then words; a code block cut in two is closed and reopened so each piece renders.
Lengths are counted in UTF-16 code units, as Telegram counts them (an emoji may be two): never
fewer than the characters, so the pieces fit a limit counted either way."""

from __future__ import annotations

import re

FENCE = re.compile(r"^\s*(```|~~~)")


def split_text(markdown: str, limit: int) -> list[str]:
    """Pieces of at most `limit` characters, in order, none empty (an empty text: [])."""
    pieces: list[str] = []
    current = ""
    for block in _blocks(markdown.strip()):
        for part in _fit(block, limit):
            joined = f"{current}\n\n{part}" if current else part
            if size(joined) <= limit:
                current = joined
            else:
                pieces.append(current)
                current = part
    if current:
        pieces.append(current)
    return pieces


def size(text: str) -> int:
    """The text's length in UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def _blocks(text: str) -> list[str]:
    """Paragraphs (split at blank lines), a fenced code block whole even with blank lines."""
    blocks: list[str] = []
    lines: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        if not line.strip() and not fenced:
            if lines:
                blocks.append("\n".join(lines))
            lines = []
            continue
        lines.append(line)
    if lines:
        blocks.append("\n".join(lines))
    return blocks


def _fit(block: str, limit: int) -> list[str]:
    """A block as parts of at most `limit`: whole lines where possible."""
    if size(block) <= limit:
        return [block]
    lines = block.split("\n")
    fence = lines[0].strip() if FENCE.match(lines[0]) else ""
    if fence:  # each part is a fenced block of its own: room for the fence lines
        body = lines[1:-1] if FENCE.match(lines[-1]) and len(lines) > 1 else lines[1:]
        room = limit - size(fence) - len("\n\n```")
        return [f"{fence}\n{part}\n```" for part in _pack(body, room)]
    return _pack(lines, limit)


def _pack(lines: list[str], limit: int) -> list[str]:
    parts: list[str] = []
    current = ""
    for line in lines:
        for piece in _cut(line, limit):
            joined = f"{current}\n{piece}" if current else piece
            if size(joined) <= limit:
                current = joined
            else:
                parts.append(current)
                current = piece
    if current:
        parts.append(current)
    return parts


def _cut(line: str, limit: int) -> list[str]:
    """A line longer than the limit, cut at the last space before it (else at the limit)."""
    cuts: list[str] = []
    while size(line) > limit:
        at = limit
        while size(line[:at]) > limit:
            at -= 1
        space = line.rfind(" ", 0, at + 1)
        at = space if space > at // 2 else at
        cuts.append(line[:at])
        line = line[at:].lstrip(" ")
    return [*cuts, line] if line or not cuts else cuts
