"""Line-aware chunking that fits the embedding model's window, with overlap and a content hash.

Not a text-splitter library (langchain's, semchunk): a chunk must keep exact line numbers for its
citation and count tokens with the model's own tokenizer, which those do not give together.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

TokenCounter = Callable[[list[str]], list[int]]

# Word pieces kept free for the model's special tokens and the "passage: " style prefixes.
SPECIAL_TOKENS = 2
PREFIX_ALLOWANCE = 6


@dataclass(frozen=True)
class ChunkParams:
    """Bounds of one chunk: model tokens, characters, and lines repeated from the previous chunk."""

    max_tokens: int = 200
    max_chars: int = 700
    overlap_lines: int = 1


@dataclass(frozen=True)
class Chunk:
    """A run of lines of one file; `embed_text` adds the file's title for context."""

    path: str
    start_line: int
    end_line: int
    text: str
    embed_text: str
    hash: str
    source: str = "memory"

    @property
    def citation(self) -> str:
        return f"{self.path}#L{self.start_line}-L{self.end_line}"


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_title(lines: list[str]) -> str:
    """The first Markdown heading (without #), used as context for every chunk of the file."""
    for line in lines[:20]:
        stripped = line.strip()
        if stripped.startswith("#"):
            return stripped.lstrip("#").strip()
    return ""


def _split_long_line(line: str, max_chars: int, budget: int, count: TokenCounter) -> list[str]:
    """Pieces of one over-long line, cut at spaces where there are any."""
    pieces: list[str] = []
    rest = line
    while rest:
        cut = min(len(rest), max_chars)
        while cut > 1 and count([rest[:cut]])[0] - SPECIAL_TOKENS > budget:
            cut = max(1, int(cut * 0.8))
        if cut < len(rest):
            space = rest.rfind(" ", cut // 2, cut)
            cut = space + 1 if space > 0 else cut
        pieces.append(rest[:cut])
        rest = rest[cut:]
    return pieces


def _units(
    lines: list[str], params: ChunkParams, budget: int, count: TokenCounter
) -> list[tuple[int, str, int]]:
    """(line number, text, tokens) for each non-blank line; over-long lines become several."""
    numbered = [(i + 1, line.rstrip()) for i, line in enumerate(lines) if line.strip()]
    tokens = count([text for _, text in numbered]) if numbered else []
    units: list[tuple[int, str, int]] = []
    for (number, text), n_tokens in zip(numbered, tokens, strict=True):
        content = n_tokens - SPECIAL_TOKENS
        if content <= budget and len(text) <= params.max_chars:
            units.append((number, text, content))
            continue
        for piece in _split_long_line(text, params.max_chars, budget, count):
            units.append((number, piece, count([piece])[0] - SPECIAL_TOKENS))
    return units


def chunk_lines(
    path: str,
    lines: list[str],
    count: TokenCounter,
    params: ChunkParams,
    source: str = "memory",
) -> list[Chunk]:
    """Groups lines into chunks; a heading starts a new chunk; each chunk fits the window."""
    title = file_title(lines)
    title_tokens = count([title])[0] - SPECIAL_TOKENS if title else 0
    budget = max(8, params.max_tokens - SPECIAL_TOKENS - PREFIX_ALLOWANCE - title_tokens)
    units = _units(lines, params, budget, count)
    chunks: list[Chunk] = []
    start = 0
    while start < len(units):
        end, used_tokens, used_chars = start, 0, 0
        while end < len(units):
            _, text, n_tokens = units[end]
            is_heading = text.lstrip().startswith("#")
            over = used_tokens + n_tokens + 1 > budget or used_chars + len(text) > params.max_chars
            if end > start and (over or is_heading):
                break
            used_tokens += n_tokens + 1
            used_chars += len(text) + 1
            end += 1
        chunks.append(_make_chunk(path, title, units[start:end], source))
        if end >= len(units):
            break
        next_start = end - params.overlap_lines
        if units[end][1].lstrip().startswith("#"):
            next_start = end
        start = max(start + 1, next_start)
    return chunks


def _make_chunk(path: str, title: str, units: list[tuple[int, str, int]], source: str) -> Chunk:
    text = "\n".join(text for _, text, _ in units)
    first = text.split("\n", 1)[0].lstrip("#").strip()
    embed_text = f"{title}\n{text}" if title and first != title else text
    return Chunk(
        path=path,
        start_line=units[0][0],
        end_line=units[-1][0],
        text=text,
        embed_text=embed_text,
        hash=content_hash(embed_text),
        source=source,
    )
