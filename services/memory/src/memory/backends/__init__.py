"""Vector backends, swappable by config and found by name in the `crayfish.memory_backends`
entry-point group: qdrant, qdrant-edge, pgvector, lancedb built in, others from any package."""

from __future__ import annotations

from pathlib import Path

from memory.backends.base import (
    DEFAULT_EXACT_MAX_CHUNKS,
    DimensionMismatchError,
    KeywordSearch,
    VectorBackend,
    VectorPoint,
)
from memory.backends.registry import (
    GROUP,
    BackendContext,
    BackendFactory,
    UnknownBackendError,
    backend_names,
    load_factory,
)


def make_backend(
    name: str,
    folder: Path,
    collection: str,
    qdrant_url: str | None = None,
    qdrant_api_key: str | None = None,
    exact_max_chunks: int = DEFAULT_EXACT_MAX_CHUNKS,
    database_url: str | None = None,
) -> VectorBackend:
    """The backend registered as `name`, storing under `folder` (or in its server/database);
    stores up to `exact_max_chunks` vectors are searched exactly (0: the store's own default)."""
    context = BackendContext(
        folder=folder,
        collection=collection,
        exact_max_chunks=exact_max_chunks,
        qdrant_url=qdrant_url,
        qdrant_api_key=qdrant_api_key,
        database_url=database_url,
    )
    return load_factory(name)(context)


__all__ = [
    "GROUP",
    "BackendContext",
    "BackendFactory",
    "DimensionMismatchError",
    "KeywordSearch",
    "UnknownBackendError",
    "VectorBackend",
    "VectorPoint",
    "backend_names",
    "make_backend",
]
