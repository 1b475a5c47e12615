"""The eval's dataset (questions with evidence lines) and its metrics: recall@k, MRR, nDCG.

Not ranx or pytrec_eval: those judge documents by id, while a hit here counts by the evidence
lines its line range covers, and a second hit over the same lines earns nothing.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# An evidence "line" that stands for the whole file (BEIR: the relevant document).
WHOLE_FILE = 0


@dataclass(frozen=True)
class Query:
    question: str
    # (path relative to the corpus, 1-based line or WHOLE_FILE)
    evidence: tuple[tuple[str, int], ...]
    # The dataset's own label for the kind of question (LoCoMo: 1-5), "" when it has none.
    category: str = ""
    # Relevance grade of each evidence item, in evidence's order (BEIR qrels scores, e.g. 2 =
    # highly relevant); empty = 1 each. Only nDCG uses it; recall, hit and MRR stay binary.
    grades: tuple[float, ...] = ()


@dataclass(frozen=True)
class Span:
    path: str
    start_line: int
    end_line: int

    def covers(self, path: str, line: int) -> bool:
        if self.path != path:
            return False
        return line == WHOLE_FILE or self.start_line <= line <= self.end_line


def load_queries(dataset: Path) -> list[Query]:
    queries = []
    with (dataset / "queries.jsonl").open(encoding="utf-8") as lines:
        for raw in lines:
            if not raw.strip():
                continue
            record = json.loads(raw)
            evidence = tuple((e["path"], int(e["line"])) for e in record["evidence"])
            if evidence:
                category = str(record.get("category", ""))
                queries.append(Query(record["question"], evidence, category))
    return queries


def recall_at(spans: list[Span], evidence: tuple[tuple[str, int], ...], k: int) -> float:
    """Share of the evidence lines that the first k hits cover."""
    top = spans[:k]
    covered = sum(1 for path, line in evidence if any(s.covers(path, line) for s in top))
    return covered / len(evidence)


def best_reorder(spans: list[Span], evidence: tuple[tuple[str, int], ...], k: int) -> list[Span]:
    """The k of `spans` a perfect reranker would put first: greedily the span covering the most
    evidence lines not yet covered (ties keep the original order). Measures how much a reranker
    over these candidates could gain at most; the rest must come from finding better candidates."""
    chosen: list[Span] = []
    covered: set[tuple[str, int]] = set()
    left = list(spans)
    while left and len(chosen) < k:
        gains = [len({e for e in evidence if s.covers(*e)} - covered) for s in left]
        best = max(range(len(left)), key=lambda i: (gains[i], -i))
        span = left.pop(best)
        covered |= {e for e in evidence if span.covers(*e)}
        chosen.append(span)
    return chosen


def reciprocal_rank(spans: list[Span], evidence: tuple[tuple[str, int], ...], k: int = 10) -> float:
    for rank, span in enumerate(spans[:k], start=1):
        if any(span.covers(path, line) for path, line in evidence):
            return 1.0 / rank
    return 0.0


def ndcg_at(
    spans: list[Span],
    evidence: tuple[tuple[str, int], ...],
    k: int = 10,
    grades: tuple[float, ...] = (),
) -> float:
    """A hit that covers evidence no earlier hit covered gains that evidence's grade (the
    highest, if it covers several; 1 without grades), as trec_eval and BEIR count it (gain =
    grade, not 2^grade - 1); the ideal ranking puts the highest grades first."""
    gain: dict[tuple[str, int], float] = {}
    for item, grade in zip(evidence, grades or (1.0,) * len(evidence), strict=True):
        gain[item] = max(grade, gain.get(item, 0.0))
    seen: set[tuple[str, int]] = set()
    dcg = 0.0
    for rank, span in enumerate(spans[:k], start=1):
        new = {(p, line) for p, line in gain if span.covers(p, line)} - seen
        if new:
            dcg += max(gain[item] for item in new) / math.log2(rank + 1)
            seen |= new
    best = sorted(gain.values(), reverse=True)[:k]
    ideal = sum(g / math.log2(rank + 1) for rank, g in enumerate(best, start=1))
    return dcg / ideal if ideal else 0.0


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q * 100)) if values else 0.0
