"""Vector backends, swappable by config: qdrant (qdrant-client) and qdrant-edge (qdrant-edge-py)."""

from __future__ import annotations

from pathlib import Path

from memory.backends.base import (
    DEFAULT_EXACT_MAX_CHUNKS,
    DimensionMismatchError,
    VectorBackend,
    VectorPoint,
)

BACKENDS = ("qdrant", "qdrant-edge")


def make_backend(
    name: str,
    folder: Path,
    collection: str,
    qdrant_url: str | None = None,
    qdrant_api_key: str | None = None,
    exact_max_chunks: int = DEFAULT_EXACT_MAX_CHUNKS,
) -> VectorBackend:
    """The backend called `name`, storing under `folder` (or in the server at `qdrant_url`);
    stores up to `exact_max_chunks` vectors are searched exactly (0: the store's own default)."""
    if name == "qdrant":
        from memory.backends.qdrant_client_backend import QdrantClientBackend

        if qdrant_url:
            return QdrantClientBackend(
                collection,
                url=qdrant_url,
                api_key=qdrant_api_key,
                exact_max_chunks=exact_max_chunks,
            )
        return QdrantClientBackend(
            collection, path=folder / "qdrant-local", exact_max_chunks=exact_max_chunks
        )
    if name == "qdrant-edge":
        from memory.backends.qdrant_edge_backend import QdrantEdgeBackend

        return QdrantEdgeBackend(folder / "edge-shard", exact_max_chunks=exact_max_chunks)
    raise ValueError(f"unknown backend {name!r} (expected one of {', '.join(BACKENDS)})")


__all__ = ["BACKENDS", "DimensionMismatchError", "VectorBackend", "VectorPoint", "make_backend"]
