"""The small interface every vector backend implements, and the errors it raises."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

# Below this many vectors a search is exact (Qdrant scans them all: ~6 ms at 100k x 384-d here)
# instead of walking an HNSW graph, which missed 5-75% of the true top 100 at 100k in
# bench/memory_search_scale.py and takes 25-45 s to build.
DEFAULT_EXACT_MAX_CHUNKS = 250_000


def indexing_threshold_kb(exact_max_chunks: int, dim: int) -> int:
    """Qdrant's `indexing_threshold` (KB of vectors in a segment before HNSW is built) for
    `exact_max_chunks` float32 vectors of `dim`; 0 keeps Qdrant's default."""
    if exact_max_chunks <= 0:
        return 0
    return -(-exact_max_chunks * dim * 4 // 1024)


class DimensionMismatchError(RuntimeError):
    """The store already holds vectors of another size: refuse rather than mix them."""


@dataclass(frozen=True)
class VectorPoint:
    """One chunk's vector with the payload needed to filter by file."""

    id: int
    vector: np.ndarray
    path: str
    source: str = "memory"
    # The chunk's indexed text, for a backend with its own full-text index (KeywordSearch);
    # others ignore it.
    text: str = ""


class VectorBackend(Protocol):
    """Stores chunk vectors by id; cosine search, optionally limited to some files."""

    name: str

    def ensure(self, dim: int) -> None:
        """Creates the store for `dim`-sized vectors, or checks an existing one matches."""
        ...

    def upsert(self, points: Sequence[VectorPoint]) -> None: ...

    def delete(self, ids: Sequence[int]) -> None: ...

    def search(
        self, vector: np.ndarray, limit: int, paths: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """(id, cosine similarity) best first; `paths` limits the search to those files."""
        ...

    def count(self) -> int: ...

    def flush(self) -> None:
        """Makes writes durable and lets the store build its indexes."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class KeywordSearch(Protocol):
    """Optional: a backend with its own full-text index over `VectorPoint.text`, which the
    keyword side of search can use instead of the in-process BM25 (MEMORY_KEYWORD_INDEX=backend)."""

    def keyword_search(
        self, query: str, limit: int, paths: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """(id, score >= 0, higher is better) best first; `paths` as in `search`."""
        ...


def mismatch(store: str, existing: int, wanted: int) -> DimensionMismatchError:
    return DimensionMismatchError(
        f"{store} holds {existing}-dimensional vectors but the embedding model makes "
        f"{wanted}-dimensional ones; refusing to mix them. Point MEMORY_DATA_DIR or the "
        f"collection at a fresh store, or switch back to the model that built it."
    )
