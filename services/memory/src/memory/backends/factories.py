"""Factories of the built-in backends, registered as entry points in services/memory/pyproject.toml.

Each imports its client library only when chosen, so an unused backend costs nothing at start-up.
"""

from __future__ import annotations

from memory.backends.base import VectorBackend
from memory.backends.registry import BackendContext


def qdrant(context: BackendContext) -> VectorBackend:
    """qdrant-client: a Qdrant server at MEMORY_QDRANT_URL, else its local mode in a folder."""
    from memory.backends.qdrant_client_backend import QdrantClientBackend

    if context.qdrant_url:
        return QdrantClientBackend(
            context.collection,
            url=context.qdrant_url,
            api_key=context.qdrant_api_key,
            exact_max_chunks=context.exact_max_chunks,
        )
    return QdrantClientBackend(
        context.collection,
        path=context.folder / "qdrant-local",
        exact_max_chunks=context.exact_max_chunks,
    )


def qdrant_edge(context: BackendContext) -> VectorBackend:
    """qdrant-edge-py: the Qdrant engine in-process, one shard in a folder."""
    from memory.backends.qdrant_edge_backend import QdrantEdgeBackend

    return QdrantEdgeBackend(
        context.folder / "edge-shard", exact_max_chunks=context.exact_max_chunks
    )


def pgvector(context: BackendContext) -> VectorBackend:
    """PostgreSQL with the vector extension at MEMORY_DATABASE_URL (required)."""
    if not context.database_url:
        raise ValueError(
            "MEMORY_BACKEND=pgvector needs MEMORY_DATABASE_URL (postgresql://user@host/db of a "
            "server with the vector extension, e.g. the orchestrator's database)"
        )
    from memory.backends.pgvector_backend import PgvectorBackend

    return PgvectorBackend(
        context.database_url, context.collection, exact_max_chunks=context.exact_max_chunks
    )


def lancedb(context: BackendContext) -> VectorBackend:
    """LanceDB embedded: one table in a folder, with its own full-text index."""
    from memory.backends.lancedb_backend import LanceDBBackend

    return LanceDBBackend(
        context.folder / "lancedb", context.collection, exact_max_chunks=context.exact_max_chunks
    )
