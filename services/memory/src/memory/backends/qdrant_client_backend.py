"""Backend on qdrant-client: a Qdrant server by URL, or its embedded local mode in a folder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from qdrant_client import QdrantClient, models

from memory.backends.base import (
    DEFAULT_EXACT_MAX_CHUNKS,
    VectorPoint,
    indexing_threshold_kb,
    mismatch,
)

BATCH = 256


class QdrantClientBackend:
    """One collection; local mode is brute force in Python, a server builds HNSW only for a
    collection above `exact_max_chunks` vectors (created so; below it searches are exact)."""

    name = "qdrant"

    def __init__(
        self,
        collection: str,
        path: Path | None = None,
        url: str | None = None,
        api_key: str | None = None,
        exact_max_chunks: int = DEFAULT_EXACT_MAX_CHUNKS,
    ) -> None:
        self.exact_max_chunks = exact_max_chunks
        if url:
            self.client = QdrantClient(url=url, api_key=api_key, timeout=30)
        elif path is not None:
            path.mkdir(parents=True, exist_ok=True)
            self.client = QdrantClient(path=str(path))
        else:
            self.client = QdrantClient(location=":memory:")
        self.collection = collection
        self.remote = bool(url)

    def ensure(self, dim: int) -> None:
        if self.client.collection_exists(self.collection):
            info = self.client.get_collection(self.collection)
            vectors = info.config.params.vectors
            size = vectors.size if isinstance(vectors, models.VectorParams) else None
            if size != dim:
                raise mismatch(f"Qdrant collection {self.collection!r}", int(size or 0), dim)
            return
        threshold = indexing_threshold_kb(self.exact_max_chunks, dim)
        optimizers = None
        if threshold:
            optimizers = models.OptimizersConfigDiff(indexing_threshold=threshold)
        self.client.create_collection(
            self.collection,
            vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE),
            optimizers_config=optimizers,
        )
        if self.remote:
            self.client.create_payload_index(
                self.collection, "path", field_schema=models.PayloadSchemaType.KEYWORD
            )

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        for start in range(0, len(points), BATCH):
            batch = [
                models.PointStruct(
                    id=p.id,
                    vector=np.asarray(p.vector, dtype=np.float32).tolist(),
                    payload={"path": p.path, "source": p.source},
                )
                for p in points[start : start + BATCH]
            ]
            self.client.upsert(self.collection, points=batch, wait=True)

    def delete(self, ids: Sequence[int]) -> None:
        if ids:
            selector = models.PointIdsList(points=list(ids))
            self.client.delete(self.collection, points_selector=selector, wait=True)

    def search(
        self, vector: np.ndarray, limit: int, paths: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        if paths is not None and not paths:
            return []
        query_filter = None
        if paths is not None:
            condition = models.FieldCondition(key="path", match=models.MatchAny(any=list(paths)))
            query_filter = models.Filter(must=[condition])
        result = self.client.query_points(
            self.collection,
            query=np.asarray(vector, dtype=np.float32).tolist(),
            limit=limit,
            query_filter=query_filter,
        )
        return [(int(p.id), float(p.score)) for p in result.points]

    def count(self) -> int:
        return int(self.client.count(self.collection, exact=True).count)

    def flush(self) -> None:
        """Local mode persists on every write; a server indexes by itself."""

    def close(self) -> None:
        self.client.close()

    def drop(self) -> None:
        """Removes the collection (the eval's temporary stores)."""
        self.client.delete_collection(self.collection)
