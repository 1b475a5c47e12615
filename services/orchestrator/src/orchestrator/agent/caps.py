"""Cap long text by keeping its head and tail around a marker that says what was cut."""

from __future__ import annotations


def cap_text(text: str, max_chars: int, head_share: float = 0.7, tail_share: float = 0.2) -> str:
    """Text unchanged when it fits; else head + marker + tail, never longer than max_chars."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    cut = len(text) - int(max_chars * head_share) - int(max_chars * tail_share)
    marker = f"\n[... {cut} of {len(text)} chars cut here ...]\n"
    budget = max(0, max_chars - len(marker))
    total_share = head_share + tail_share
    head = int(budget * head_share / total_share)
    tail = budget - head
    return text[:head] + marker + (text[-tail:] if tail else "")
