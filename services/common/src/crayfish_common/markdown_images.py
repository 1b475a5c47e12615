"""The images a Markdown text shows (`![alt](target)`), read the same way by the orchestrator
(which serves a workspace image only to an answer that shows it) and the channels service
(which sends them to a chat): outside fenced code blocks, in order."""

from __future__ import annotations

import re
from dataclasses import dataclass

# `![alt](target)`, `![alt](<target with spaces>)`, either with an optional "title".
IMAGE = re.compile(
    r"!\[(?P<alt>[^\]\n]{0,500})\]\(\s*"
    r"(?:<(?P<angled>[^<>\n]{1,1000})>|(?P<bare>[^\s()<>]{1,1000}))"
    r"(?:\s+\"[^\"\n]{0,500}\")?\s*\)"
)
FENCED = re.compile(r"^[ \t]*(```|~~~).*?(?:^[ \t]*\1[ \t]*$|\Z)", re.MULTILINE | re.DOTALL)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class ShownImage:
    """One image link: its alt text, its target as written, and where it stands in the text."""

    alt: str
    target: str
    start: int
    end: int

    @property
    def remote(self) -> bool:
        """An http(s) URL (a platform may fetch it itself)."""
        return self.target.lower().startswith(("http://", "https://"))

    @property
    def in_workspace(self) -> bool:
        """A file path (relative, or absolute as the sandbox shows the workspace): no URL
        scheme (http:, data:, file:, ...) and no `//host`."""
        return not SCHEME.match(self.target) and not self.target.startswith("//")


def shown_images(markdown: str) -> list[ShownImage]:
    """Every image link of the text outside fenced code, in order (repeats included)."""
    fences = [match.span() for match in FENCED.finditer(markdown)]
    found = []
    for match in IMAGE.finditer(markdown):
        if any(start <= match.start() < end for start, end in fences):
            continue
        target = match["angled"] if match["angled"] is not None else match["bare"]
        found.append(ShownImage(match["alt"].strip(), target.strip(), *match.span()))
    return found


def workspace_paths(markdown: str) -> set[str]:
    """The workspace files the text shows as images, each path exactly as written."""
    return {image.target for image in shown_images(markdown) if image.in_workspace}


def without_workspace_images(markdown: str) -> str:
    """The text with each workspace image replaced by its alt text (a link into a folder the
    reader cannot see means nothing to them); http(s) images stay."""
    parts, kept = [], 0
    for image in shown_images(markdown):
        if image.in_workspace:
            parts += [markdown[kept : image.start], image.alt]
            kept = image.end
    return "".join(parts) + markdown[kept:]
