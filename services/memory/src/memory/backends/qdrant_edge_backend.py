"""Backend on qdrant-edge-py: the Qdrant engine in-process, one shard in a folder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import qdrant_edge as edge

from memory.backends.base import (
    DEFAULT_EXACT_MAX_CHUNKS,
    DimensionMismatchError,
    VectorPoint,
    indexing_threshold_kb,
    mismatch,
)

BATCH = 1024


class QdrantEdgeBackend:
    """An EdgeShard; `flush` persists and runs the optimizers. Up to `exact_max_chunks` vectors
    are searched exactly (no HNSW graph is built); beyond, Qdrant builds HNSW."""

    name = "qdrant-edge"

    def __init__(
        self, path: Path, hnsw_ef: int = 256, exact_max_chunks: int = DEFAULT_EXACT_MAX_CHUNKS
    ) -> None:
        self.path = path
        self.exact_max_chunks = exact_max_chunks
        # HNSW search breadth: Qdrant's default trades recall for speed; memory wants recall.
        self.params = edge.SearchParams(hnsw_ef=hnsw_ef)
        self.shard: edge.EdgeShard | None = None
        self._dirty = False

    def _config(self, dim: int) -> edge.EdgeConfig:
        params = edge.EdgeVectorParams(size=dim, distance=edge.Distance.Cosine)
        threshold = indexing_threshold_kb(self.exact_max_chunks, dim)
        optimizers = edge.EdgeOptimizersConfig(indexing_threshold=threshold) if threshold else None
        return edge.EdgeConfig(vectors=params, optimizers=optimizers)

    def ensure(self, dim: int) -> None:
        exists = self.path.is_dir() and any(self.path.iterdir())
        if not exists:
            self.path.mkdir(parents=True, exist_ok=True)
            self.shard = edge.EdgeShard.create(str(self.path), self._config(dim))
            op = edge.UpdateOperation.create_field_index("path", edge.PayloadSchemaType.Keyword)
            self.shard.update(op)
            return
        try:
            self.shard = edge.EdgeShard.load(str(self.path), self._config(dim))
        except Exception as exc:
            if "vector size" not in str(exc) and "ncompatible" not in str(exc):
                raise
            found = _size_in_message(str(exc))
            raise mismatch(f"Qdrant Edge shard {self.path}", found, dim) from exc

    @property
    def _shard(self) -> edge.EdgeShard:
        if self.shard is None:
            raise RuntimeError("backend not opened: call ensure(dim) first")
        return self.shard

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        for start in range(0, len(points), BATCH):
            batch = [
                edge.Point(
                    p.id,
                    np.asarray(p.vector, dtype=np.float32).tolist(),
                    {"path": p.path, "source": p.source},
                )
                for p in points[start : start + BATCH]
            ]
            self._shard.update(edge.UpdateOperation.upsert_points(batch))
        self._dirty = self._dirty or bool(points)

    def delete(self, ids: Sequence[int]) -> None:
        if ids:
            self._shard.update(edge.UpdateOperation.delete_points(list(ids)))
            self._dirty = True

    def search(
        self, vector: np.ndarray, limit: int, paths: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        if paths is not None and not paths:
            return []
        query_filter = None
        if paths is not None:
            condition = edge.FieldCondition(key="path", match=edge.MatchAny(list(paths)))
            query_filter = edge.Filter(must=[condition])
        request = edge.QueryRequest(
            limit=limit,
            query=edge.Query.Nearest(np.asarray(vector, dtype=np.float32).tolist()),
            filter=query_filter,
            with_payload=False,
            params=self.params,
        )
        return [(int(p.id), float(p.score)) for p in self._shard.query(request)]

    def count(self) -> int:
        return int(self._shard.count(edge.CountRequest(exact=True)))

    def indexed(self) -> bool:
        """Whether Qdrant has built HNSW over any vectors (searches are approximate)."""
        return int(self._shard.info().indexed_vectors_count) > 0

    def flush(self) -> None:
        if self._dirty:
            self._shard.optimize()
            self._shard.flush()
            self._dirty = False

    def close(self) -> None:
        if self.shard is not None:
            self.flush()
            self.shard.close()
            self.shard = None


def _size_in_message(message: str) -> int:
    """The existing vector size from Qdrant's 'expected vector size X, but got Y' message."""
    marker = "but got "
    if marker in message:
        digits = "".join(ch for ch in message.split(marker, 1)[1][:12] if ch.isdigit())
        if digits:
            return int(digits)
    return 0


__all__ = ["DimensionMismatchError", "QdrantEdgeBackend"]
