"""Conformance suite every vector backend passes: every name in the `crayfish.memory_backends`
entry-point group (built-ins and any installed package), plus a Qdrant server with
MEMORY_TEST_QDRANT_URL. Backends get a PostgreSQL database (tests/postgres.py) as database_url.
Also past `exact_max_chunks` (where a backend builds its index) and, for a backend with its own
full-text index (KeywordSearch), its keyword search; one without is refused for it by name."""

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
from memory.backends.base import KeywordSearch
from memory.backends.registry import BUILTINS
from memory.config import MemorySettings
from memory.core import UnsupportedOptionError, require_keyword_search

DIM = 8
SERVER = os.environ.get("MEMORY_TEST_QDRANT_URL")
KINDS = [*backend_names(), *(["qdrant-server"] if SERVER else [])]


@pytest.fixture(params=KINDS)
def kind(request) -> str:
    return request.param


def test_the_suite_runs_on_every_built_in_backend():
    """None needs a server (qdrant is qdrant-client's local mode in a folder; pgvector gets the
    session's PostgreSQL), so `make test` runs each: a registration gone wrong must not drop one
    from the suite unnoticed."""
    assert set(BUILTINS) <= set(KINDS), KINDS


@pytest.fixture
def open_backend(kind: str, request) -> Callable[..., VectorBackend]:
    """Opens the backend under test; a database is made only for backends that take one."""
    url = request.getfixturevalue("memory_database_url") if kind == "pgvector" else None

    def open_(
        kind: str, folder: Path, collection: str = "conformance", **options: int
    ) -> VectorBackend:
        if kind == "qdrant-server":
            return make_backend("qdrant", folder, collection, qdrant_url=SERVER, **options)
        return make_backend(kind, folder, collection, database_url=url, **options)

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


def exact_top(vectors: np.ndarray, query: np.ndarray, n: int, rows: np.ndarray | None = None):
    """Ids (1-based) of the n best cosines by numpy, optionally among `rows` only."""
    scores = vectors @ query
    if rows is not None:
        scores = np.where(rows, scores, -np.inf)
    return (np.argsort(-scores, kind="stable")[:n] + 1).tolist()


def test_search_past_the_exact_threshold_agrees_with_exact_search(
    open_backend, kind, tmp_path, collection
):
    """3,000 vectors with exact_max_chunks 500: the backend builds its index (those that say
    whether they have one must say so) and its answers still match an exact scan's."""
    rng = np.random.default_rng(13)
    vectors = rng.normal(size=(3000, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    files = np.arange(3000) % 30
    backend = open_backend(kind, tmp_path, collection, exact_max_chunks=500)
    backend.ensure(DIM)
    backend.upsert([VectorPoint(i + 1, v, f"memory/{files[i]}.md") for i, v in enumerate(vectors)])
    backend.flush()
    assert backend.count() == 3000
    indexed = getattr(backend, "indexed", None)
    if callable(indexed):
        assert indexed(), "more vectors than exact_max_chunks, yet no index was built"
    overlap = []
    for n in range(20):
        query = vectors[n] + 0.3 * rng.normal(size=DIM).astype(np.float32)
        query /= np.linalg.norm(query)
        truth = exact_top(vectors, query, 10)
        ranked = backend.search(query, limit=10)
        assert ranked[0][0] == truth[0]
        assert ranked[0][1] == pytest.approx(float(vectors[truth[0] - 1] @ query), abs=1e-3)
        overlap.append(len({i for i, _ in ranked} & set(truth)) / 10)
    assert np.mean(overlap) >= 0.9, overlap
    # A filtered search still returns `limit` rows, all from those files: 3 files hold 300.
    only = [f"memory/{f}.md" for f in (0, 1, 2)]
    filtered = backend.search(vectors[4], limit=40, paths=only)
    assert len(filtered) == 40
    assert {(i - 1) % 30 for i, _ in filtered} <= {0, 1, 2}
    assert filtered[0][0] == exact_top(vectors, vectors[4], 1, files < 3)[0]
    # One file's 100 vectors, asked for all of them: every one comes back.
    one = backend.search(vectors[7], limit=100, paths=["memory/7.md"])
    assert sorted(i for i, _ in one) == [i + 1 for i in range(3000) if files[i] == 7]
    backend.close()


NOTES = [
    VectorPoint(1, unit(1, 0), "memory/a.md", text="The dog is a border collie named Biscuit."),
    VectorPoint(2, unit(1, 1), "memory/a.md", text="Green tea is preferred over coffee."),
    VectorPoint(3, unit(0, 1), "memory/b.md", text="Planted basil; the basil needs watering."),
    VectorPoint(4, unit(0, 0, 1), "sessions/s.jsonl", "sessions", "The collie saw the vet."),
]


def test_keyword_search_ranks_filters_and_follows_writes(open_backend, kind, tmp_path, collection):
    """With a full-text index of its own: the words' chunks best first, path filters, replaced
    and deleted text gone after flush. Without one, MEMORY_KEYWORD_INDEX=backend is refused."""
    backend = open_backend(kind, tmp_path, collection)
    backend.ensure(DIM)
    backend.upsert(NOTES)
    backend.flush()
    if not isinstance(backend, KeywordSearch):
        with pytest.raises(UnsupportedOptionError, match=f"backend '{kind}' has no full-text"):
            require_keyword_search(backend, kind)
        backend.close()
        return
    ranked = backend.keyword_search("border collie", limit=3)
    assert [i for i, _ in ranked] == [1, 4]
    assert ranked[0][1] >= ranked[1][1] > 0
    assert backend.keyword_search("collie", 3, ["memory/b.md", "sessions/s.jsonl"])[0][0] == 4
    assert [i for i, _ in backend.keyword_search("collie", 3, ["memory/a.md"])] == [1]
    assert backend.keyword_search("collie", 3, []) == []
    assert backend.keyword_search("zebra", 3) == []
    backend.upsert(
        [VectorPoint(3, unit(0, 1), "memory/b.md", text="The plumber fixed the boiler.")]
    )
    backend.delete([1])
    backend.flush()
    assert backend.keyword_search("basil", 3) == []
    assert [i for i, _ in backend.keyword_search("boiler", 3)] == [3]
    assert [i for i, _ in backend.keyword_search("collie", 3)] == [4]
    backend.close()
