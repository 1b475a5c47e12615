"""Conformance suite every vector backend passes: every name in the `crayfish.memory_backends`
entry-point group (built-ins and any installed package), plus a Qdrant server with
MEMORY_TEST_QDRANT_URL. Backends get a PostgreSQL database (tests/postgres.py) as database_url."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from memory.backends import (
    DimensionMismatchError,
    VectorBackend,
    VectorPoint,
    backend_names,
    make_backend,
)
from memory.config import MemorySettings

DIM = 8
SERVER = os.environ.get("MEMORY_TEST_QDRANT_URL")
KINDS = [*backend_names(), *(["qdrant-server"] if SERVER else [])]


@pytest.fixture(params=KINDS)
def kind(request) -> str:
    return request.param


@pytest.fixture
def open_backend(kind: str, request) -> Callable[..., VectorBackend]:
    """Opens the backend under test; a database is made only for backends that take one."""
    url = request.getfixturevalue("memory_database_url") if kind == "pgvector" else None

    def open_(kind: str, folder: Path, collection: str = "conformance") -> VectorBackend:
        if kind == "qdrant-server":
            return make_backend("qdrant", folder, collection, qdrant_url=SERVER)
        return make_backend(kind, folder, collection, database_url=url)

    return open_


@pytest.fixture
def collection() -> str:
    return f"conformance_{uuid.uuid4().hex[:8]}"


def unit(*values: float) -> np.ndarray:
    vector = np.zeros(DIM, dtype=np.float32)
    vector[: len(values)] = values
    return vector / np.linalg.norm(vector)


POINTS = [
    VectorPoint(1, unit(1, 0), "memory/a.md"),
    VectorPoint(2, unit(1, 1), "memory/a.md"),
    VectorPoint(3, unit(0, 1), "memory/b.md"),
    VectorPoint(4, unit(0, 0, 1), "sessions/s.jsonl", "sessions"),
]


def test_search_ranks_by_cosine_and_filters_by_path(open_backend, kind, tmp_path, collection):
    backend = open_backend(kind, tmp_path, collection)
    backend.ensure(DIM)
    backend.upsert(POINTS)
    backend.flush()
    assert backend.count() == 4
    ranked = backend.search(unit(1, 0.1), limit=3)
    assert [i for i, _ in ranked] == [1, 2, 3]
    assert ranked[0][1] == pytest.approx(float(unit(1, 0.1) @ unit(1, 0)), abs=1e-4)
    only_b = backend.search(unit(1, 0.5), limit=3, paths=["memory/b.md", "sessions/s.jsonl"])
    assert [i for i, _ in only_b] == [3, 4]
    assert backend.search(unit(1, 0), limit=3, paths=[]) == []
    backend.close()


def test_upsert_replaces_and_delete_removes(open_backend, kind, tmp_path, collection):
    backend = open_backend(kind, tmp_path, collection)
    backend.ensure(DIM)
    backend.upsert(POINTS)
    backend.upsert([VectorPoint(1, unit(0, 0, 0, 1), "memory/a.md")])
    backend.delete([2, 3])
    backend.delete([])
    backend.flush()
    assert backend.count() == 2
    top = backend.search(unit(0, 0, 0, 1), limit=1)
    assert top[0][0] == 1 and top[0][1] == pytest.approx(1.0, abs=1e-4)
    backend.close()


def test_reopen_keeps_points(open_backend, kind, tmp_path, collection):
    first = open_backend(kind, tmp_path, collection)
    first.ensure(DIM)
    first.upsert(POINTS)
    first.close()
    again = open_backend(kind, tmp_path, collection)
    again.ensure(DIM)
    assert again.count() == 4
    assert again.search(unit(0, 1), limit=1)[0][0] == 3
    again.close()


def test_dimension_mismatch_fails_loudly(open_backend, kind, tmp_path, collection):
    first = open_backend(kind, tmp_path, collection)
    first.ensure(DIM)
    first.upsert(POINTS)
    first.close()
    other = open_backend(kind, tmp_path, collection)
    with pytest.raises(DimensionMismatchError, match=r"8-dimensional.*16-dimensional"):
        other.ensure(16)
    other.close()


def test_large_batch_round_trip(open_backend, kind, tmp_path, collection):
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(1500, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    backend = open_backend(kind, tmp_path, collection)
    backend.ensure(DIM)
    backend.upsert([VectorPoint(i + 1, v, f"memory/{i % 7}.md") for i, v in enumerate(vectors)])
    backend.flush()
    assert backend.count() == 1500
    assert backend.search(vectors[321], limit=1)[0][0] == 322
    backend.close()


def test_a_server_url_selects_the_qdrant_backend(monkeypatch):
    monkeypatch.setenv("MEMORY_QDRANT_URL", "http://127.0.0.1:6333")
    assert MemorySettings().backend == "qdrant"
    monkeypatch.setenv("MEMORY_BACKEND", "qdrant-edge")
    assert MemorySettings().backend == "qdrant-edge"
    monkeypatch.delenv("MEMORY_QDRANT_URL")
    monkeypatch.delenv("MEMORY_BACKEND")
    assert MemorySettings().backend == "qdrant-edge"


def test_qdrant_edge_search_is_exact_below_the_configured_size(tmp_path):
    """10k 384-d vectors are past the size where Qdrant would build an HNSW graph (which missed
    ~18% of the true top 100 here); below MEMORY_EXACT_SEARCH_MAX_CHUNKS nothing may be missed."""
    rng = np.random.default_rng(11)
    vectors = rng.normal(size=(10_000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    backend = make_backend("qdrant-edge", tmp_path, "exact", exact_max_chunks=50_000)
    backend.ensure(384)
    backend.upsert([VectorPoint(i + 1, v, f"memory/{i % 50}.md") for i, v in enumerate(vectors)])
    backend.flush()
    for query in vectors[:20] + 0.5 * rng.normal(size=(20, 384)).astype(np.float32) / 20:
        query /= np.linalg.norm(query)
        truth = (np.argsort(-(vectors @ query))[:100] + 1).tolist()
        assert [i for i, _ in backend.search(query, limit=100)] == truth
    backend.close()
