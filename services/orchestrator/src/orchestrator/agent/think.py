"""Keeps `<think>…</think>` reasoning out of the user's answer, also across streamed deltas."""

from __future__ import annotations

import re

_OPEN, _CLOSE = "<think>", "</think>"
_BLOCK = re.compile(r"<think>.*?(?:</think>|$)\s*", re.S)


def strip_think(text: str) -> tuple[str, str]:
    """(answer without think blocks, the reasoning that was inside them)."""
    reasoning = "".join(m.group(0) for m in _BLOCK.finditer(text))
    reasoning = reasoning.replace(_OPEN, "").replace(_CLOSE, "").strip()
    answer = _BLOCK.sub("", text)
    # A reply that starts mid-reasoning (the server ate the opening tag) ends it with `</think>`.
    if _CLOSE in answer:
        before, _, answer = answer.partition(_CLOSE)
        reasoning = (reasoning + "\n" + before).strip()
    return answer.strip(), reasoning


class ThinkFilter:
    """Feed streamed text in; get back only what lies outside think blocks."""

    def __init__(self) -> None:
        self.inside = False
        self.pending = ""

    def feed(self, delta: str) -> str:
        text = self.pending + delta
        self.pending = ""
        out: list[str] = []
        while text:
            tag = _CLOSE if self.inside else _OPEN
            at = text.find(tag)
            if at >= 0:
                if not self.inside:
                    out.append(text[:at])
                text = text[at + len(tag) :]
                self.inside = not self.inside
                continue
            keep = partial_tag_suffix(text, tag)
            if not self.inside:
                out.append(text[: len(text) - keep])
            self.pending = text[len(text) - keep :] if keep else ""
            break
        return "".join(out)

    def flush(self) -> str:
        rest, self.pending = self.pending, ""
        return "" if self.inside else rest


def partial_tag_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of text that is a prefix of tag (a tag split across deltas)."""
    at = text.find(tag[0], max(0, len(text) - len(tag) + 1))
    while at >= 0:  # the earliest start in the window is the longest suffix
        if tag.startswith(text[at:]):
            return len(text) - at
        at = text.find(tag[0], at + 1)
    return 0
