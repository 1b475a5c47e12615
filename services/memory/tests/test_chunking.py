"""Chunks are line-aware, overlap, and fit the model's window (measured with its tokenizer)."""

from __future__ import annotations

import itertools

from memory.chunking import ChunkParams, chunk_lines
from memory.search import window


def test_chunks_fit_the_model_window_and_cover_every_line(embedder):
    words = "tokenization of unusual words like antidisestablishmentarianism and 2026-05-01"
    lines = ["# Journal", ""] + [f"{n}. {words} item {n}" for n in range(60)]
    lines.append("x " * 900)  # one line far longer than the window
    params = ChunkParams(max_tokens=embedder.max_tokens, max_chars=5000, overlap_lines=1)
    chunks = chunk_lines("memory/j.md", lines, embedder.count_tokens, params)
    counts = embedder.count_tokens([c.embed_text for c in chunks])
    assert max(counts) <= embedder.max_tokens == 256
    covered = {n for c in chunks for n in range(c.start_line, c.end_line + 1)}
    assert covered >= {n for n, line in enumerate(lines, 1) if line.strip()}
    long_pieces = [c for c in chunks if c.start_line == c.end_line == len(lines)]
    assert len(long_pieces) >= 2, "an over-long line is split into pieces citing its line"
    multi = [c for c in chunks if c.end_line > c.start_line]
    overlaps = [b.start_line == a.end_line for a, b in itertools.pairwise(multi)]
    assert any(overlaps), "consecutive chunks share a line"


def test_chunks_respect_the_char_cap_and_start_at_headings(embedder):
    lines = ["# Title", "", "alpha " * 20, "beta " * 20, "## Section two", "gamma " * 20]
    params = ChunkParams(max_tokens=200, max_chars=300, overlap_lines=1)
    chunks = chunk_lines("MEMORY.md", lines, embedder.count_tokens, params)
    assert all(len(c.text) <= 300 for c in chunks)
    assert any(c.text.startswith("## Section two") for c in chunks)
    assert all("Title" in c.embed_text for c in chunks), "the file title gives every chunk context"
    assert chunks[0].citation == f"MEMORY.md#L1-L{chunks[0].end_line}"
    assert len({c.hash for c in chunks}) == len(chunks)


def test_window_grows_around_a_hit_within_the_cap():
    lines = ["l1", "", "line three", "line four", "line five", "six", ""]
    assert window(lines, 4, 4, 32) == (3, 5)
    assert window(lines, 4, 4, 1000) == (1, 6)
    assert window(lines, 4, 4, 5) == (4, 4)
