"""Ranking: dense, keyword (BM25) and hybrid fusion into hits with snippets and citations.

The two fusions are a few lines each; a fusion library (ranx) would bring numba for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from memory.backends import KeywordSearch
from memory.index import MemoryIndex
from memory.sources import SESSIONS_PREFIX
from memory.state import StoredChunk

STRATEGIES = ("dense", "keyword", "hybrid")


@dataclass(frozen=True)
class SearchOptions:
    """One search's knobs; see the README for score ranges."""

    top_k: int = 6
    min_score: float = 0.0
    path_prefix: str = ""
    strategy: str = "hybrid"
    snippet_chars: int = 700
    # A hit grows from its chunk to the surrounding lines up to this many characters (0: off).
    window_chars: int = 700
    # Hybrid: "weighted" (dense_weight * dense + keyword_weight * keyword) or "rrf".
    fusion: str = "weighted"
    dense_weight: float = 0.6
    keyword_weight: float = 0.4
    rrf_k: int = 60
    # "builtin": the in-process BM25; "backend": the backend's own full-text index.
    keyword_index: str = "builtin"


@dataclass(frozen=True)
class Hit:
    """One search result."""

    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    source: str

    @property
    def citation(self) -> str:
        return f"{self.path}#L{self.start_line}-L{self.end_line}"


def snippet(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(1, limit - 1)].rstrip() + "…"


def _query_vector(index: MemoryIndex, query: str, options: SearchOptions) -> np.ndarray | None:
    """The query's embedding when the strategy needs one, taken outside the index's lock so
    that concurrent searches reach the embedder together (it batches them)."""
    if options.strategy not in ("dense", "hybrid") or not index.chunks:
        return None  # nothing indexed: no query to embed (an auto-recall on a new workspace)
    return index.embedder.embed_query(query)


def _candidates(
    index: MemoryIndex, query: str, vector: np.ndarray | None, options: SearchOptions
) -> dict[int, float]:
    """Scores in [0, 1] by chunk id for the chosen strategy, before cut-offs."""
    if not index.chunks:
        return {}
    paths = None
    allowed = None
    if options.path_prefix:
        allowed = {i for i, c in index.chunks.items() if c.path.startswith(options.path_prefix)}
        paths = sorted({index.chunks[i].path for i in allowed})
        if not paths:
            return {}
    # Fixed depth so that a hit's fused score does not depend on how many hits were asked for.
    depth = max(100, options.top_k * 4)
    dense: list[tuple[int, float]] = []
    keyword: list[tuple[int, float]] = []
    if vector is not None:
        dense = [(i, max(0.0, min(1.0, s))) for i, s in index.backend.search(vector, depth, paths)]
        dense = [(i, s) for i, s in dense if i in index.chunks]
    if options.strategy in ("keyword", "hybrid"):
        keyword = _keyword(index, query, depth, allowed, paths, options.keyword_index)
    if options.strategy == "dense":
        return dict(dense)
    if options.strategy == "keyword":
        return dict(keyword)
    if options.fusion == "rrf":
        return _rrf([dense, keyword], options.rrf_k)
    return _weighted(dense, keyword, options.dense_weight, options.keyword_weight)


def _keyword(
    index: MemoryIndex,
    query: str,
    depth: int,
    allowed: set[int] | None,
    paths: list[str] | None,
    source: str,
) -> list[tuple[int, float]]:
    """BM25 scores in [0, 1]: the in-process index's, or the backend's own divided by its best."""
    backend = index.backend
    if source != "backend" or not isinstance(backend, KeywordSearch):
        return index.bm25.search(query, depth, allowed)
    ranked = [(i, s) for i, s in backend.keyword_search(query, depth, paths) if i in index.chunks]
    top = max((s for _, s in ranked), default=0.0)
    return [(i, s / top) for i, s in ranked] if top > 0 else []


def _weighted(
    dense: list[tuple[int, float]], keyword: list[tuple[int, float]], wd: float, wk: float
) -> dict[int, float]:
    """Weighted sum; a chunk missing from one list gets that list's lowest score."""
    total = (wd + wk) or 1.0
    d, k = dict(dense), dict(keyword)
    d_floor = min(d.values(), default=0.0)
    k_floor = min(k.values(), default=0.0)
    return {i: (wd * d.get(i, d_floor) + wk * k.get(i, k_floor)) / total for i in {*d, *k}}


def _rrf(lists: list[list[tuple[int, float]]], k: int) -> dict[int, float]:
    """Reciprocal rank fusion, scaled so a chunk ranked first everywhere scores 1."""
    used = [ranked for ranked in lists if ranked]
    if not used:
        return {}
    scores: dict[int, float] = {}
    for ranked in used:
        for rank, (i, _) in enumerate(ranked, start=1):
            scores[i] = scores.get(i, 0.0) + 1.0 / (k + rank)
    best = len(used) / (k + 1)
    return {i: s / best for i, s in scores.items()}


def search(index: MemoryIndex, query: str, options: SearchOptions) -> list[Hit]:
    """The best hits, at most top_k, none below min_score; sessions capped to a third."""
    if options.strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {options.strategy!r}; use one of {STRATEGIES}")
    if not query.strip():
        return []
    vector = _query_vector(index, query, options)
    with index.lock:
        scores = _candidates(index, query, vector, options)
        chunks = {i: index.chunks[i] for i in scores if i in index.chunks}
    ranked = sorted(chunks, key=lambda i: (-scores[i], chunks[i].path, chunks[i].start_line))
    session_cap = options.top_k
    if not options.path_prefix.startswith(SESSIONS_PREFIX):
        session_cap = max(1, math.ceil(options.top_k / 3))
    hits: list[Hit] = []
    sessions = 0
    for i in ranked:
        chunk, score = chunks[i], scores[i]
        if score < options.min_score or len(hits) >= options.top_k:
            break
        if any(_inside(chunk, hit) for hit in hits):
            continue
        if chunk.source == "sessions":
            if sessions >= session_cap:
                continue
            sessions += 1
        hits.append(_hit(index, chunk, score, options))
    return hits


def _hit(index: MemoryIndex, chunk: StoredChunk, score: float, options: SearchOptions) -> Hit:
    start, end, text = chunk.start_line, chunk.end_line, chunk.text
    if options.window_chars > len(text):
        with index.lock:
            lines = index.file_lines(chunk.path)
        start, end = window(lines, start, end, options.window_chars)
        text = "\n".join(lines[start - 1 : end]).strip("\n") or text
    return Hit(chunk.path, start, end, score, snippet(text, options.snippet_chars), chunk.source)


def window(lines: list[str], start: int, end: int, limit: int) -> tuple[int, int]:
    """Grows lines start..end (1-based) by whole neighbouring lines, alternating before and
    after, while the text stays within `limit` characters; blank edge lines are trimmed."""
    if not lines or end > len(lines):
        return start, end
    size = sum(len(line) + 1 for line in lines[start - 1 : end])
    grew = True
    while grew:
        grew = False
        for candidate in (start - 1, end + 1):
            if 1 <= candidate <= len(lines) and size + len(lines[candidate - 1]) + 1 <= limit:
                size += len(lines[candidate - 1]) + 1
                start, end = min(start, candidate), max(end, candidate)
                grew = True
    while start < end and not lines[start - 1].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return start, end


def _inside(chunk: StoredChunk, hit: Hit) -> bool:
    same = chunk.path == hit.path
    return same and hit.start_line <= chunk.start_line and chunk.end_line <= hit.end_line
