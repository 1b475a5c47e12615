"""Caps long text by keeping its head and tail around a marker that says what was cut.

One implementation for every service; each caller picks the split: 0.5 keeps as much of the
end as of the beginning (command output, where the error is often last), a larger share keeps
more of the beginning (a document read top-down).
"""

from __future__ import annotations

from typing import NamedTuple


class Capped(NamedTuple):
    """The text as capped, and how many characters of the original were cut (0: unchanged)."""

    text: str
    cut: int

    @property
    def truncated(self) -> bool:
        return self.cut > 0


def cap_text(text: str, max_chars: int, head_share: float = 0.5) -> Capped:
    """The text when it fits (or max_chars <= 0: no cap); else head + marker + tail.

    The result, marker included, is never longer than max_chars. `head_share` is the head's part
    of the characters kept (the tail gets the rest).
    """
    if not 0.0 <= head_share <= 1.0:
        raise ValueError(f"head_share must be between 0 and 1, not {head_share}")
    if max_chars <= 0 or len(text) <= max_chars:
        return Capped(text, 0)
    # Sized for the largest count the marker could show, so the final one always fits.
    room = max_chars - len(_marker(len(text), len(text)))
    if room <= 0:  # no room for a marker: a plain cut
        return Capped(text[:max_chars], len(text) - max_chars)
    head = int(room * head_share)
    tail = room - head
    cut = len(text) - head - tail
    return Capped(text[:head] + _marker(cut, len(text)) + text[len(text) - tail :], cut)


def _marker(cut: int, total: int) -> str:
    return f"\n[... {cut} of {total} chars cut here ...]\n"
