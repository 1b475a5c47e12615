"""Choosing a backend: names from the entry-point group, clear errors, pgvector's index rule."""

from __future__ import annotations

import tomllib
import uuid
from pathlib import Path

import numpy as np
import pytest
from memory.backends import UnknownBackendError, VectorPoint, backend_names, make_backend
from memory.backends.pgvector_backend import PgvectorBackend, redacted
from memory.backends.registry import BUILTINS, GROUP
from memory.config import MemorySettings
from pydantic import ValidationError

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"


def test_the_builtins_are_registered_as_entry_points():
    registered = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"][GROUP]
    assert registered == BUILTINS
    assert {"qdrant", "qdrant-edge", "pgvector", "lancedb"} <= set(backend_names())


def test_an_unknown_backend_is_refused_with_the_registered_names(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORY_BACKEND", "milvus")
    with pytest.raises(ValidationError, match=r"unknown backend 'milvus'.*pgvector"):
        MemorySettings()
    with pytest.raises(UnknownBackendError, match="lancedb"):
        make_backend("milvus", tmp_path, "c")


def test_pgvector_needs_a_database_url(tmp_path):
    with pytest.raises(ValueError, match="MEMORY_DATABASE_URL"):
        make_backend("pgvector", tmp_path, "c")


def test_a_bad_password_is_reported_without_it(memory_database_url, tmp_path):
    secret = "hunter2-" + uuid.uuid4().hex[:6]
    url = memory_database_url + f" password={secret} user=nobody_here"
    with pytest.raises(RuntimeError) as caught:
        make_backend("pgvector", tmp_path, "c", database_url=url)
    assert "nobody_here" in str(caught.value) and secret not in str(caught.value)
    assert secret not in redacted(url)


def unit_rows(n: int, dim: int, seed: int) -> np.ndarray:
    data = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return data / np.linalg.norm(data, axis=1, keepdims=True)


def test_pgvector_is_exact_below_the_threshold_and_builds_hnsw_above(memory_database_url):
    data = unit_rows(600, 16, 3)
    points = [VectorPoint(i + 1, v, f"memory/{i % 30}.md") for i, v in enumerate(data)]
    collection = f"hnsw_{uuid.uuid4().hex[:8]}"
    backend = PgvectorBackend(memory_database_url, collection, exact_max_chunks=1000)
    backend.ensure(16)
    backend.upsert(points)
    backend.flush()
    assert not backend.indexed()  # 600 <= 1000: every search scans all vectors
    query = data[5]
    truth = (np.argsort(-(data @ query))[:50] + 1).tolist()
    assert [i for i, _ in backend.search(query, 50)] == truth
    backend.close()

    again = PgvectorBackend(memory_database_url, collection, exact_max_chunks=500)
    again.ensure(16)
    again.upsert(points[:1])  # any write lets flush re-check the size
    again.flush()
    assert again.indexed()  # 600 > 500: HNSW
    assert again.search(query, 1)[0][0] == 6
    # A filtered search still returns `limit` rows, all from those files.
    only = [f"memory/{i}.md" for i in range(3)]
    filtered = again.search(query, 40, only)
    assert len(filtered) == 40  # 60 vectors sit in those three files
    assert {(i - 1) % 30 for i, _ in filtered} <= {0, 1, 2}
    again.delete([p.id for p in points[100:]])
    again.flush()
    assert not again.indexed()  # back below the threshold: exact again
    again.close()


def test_keyword_search_can_use_lancedbs_own_index(make_settings, embedder):
    from memory.core import MemoryCore

    core = MemoryCore(make_settings(backend="lancedb", keyword_index="backend"), embedder).open()
    try:
        core.sync()
        hits = core.search("border collie", strategy="keyword")
        assert hits[0].path == "MEMORY.md" and "Biscuit" in hits[0].snippet
        assert core.search("basil watering", strategy="hybrid")[0].path == (
            "memory/projects/garden.md"
        )
        assert core.search("border collie", strategy="keyword", path_prefix="memory/") == []
    finally:
        core.close()


def test_a_backend_without_a_text_index_is_refused_for_backend_keywords(make_settings, embedder):
    from memory.core import MemoryCore

    settings = make_settings(backend="qdrant-edge", keyword_index="backend")
    with pytest.raises(ValueError, match="no full-text index"):
        MemoryCore(settings, embedder).open()


def test_lancedb_builds_its_vector_index_above_the_threshold(tmp_path):
    from memory.backends.lancedb_backend import LanceDBBackend

    data = unit_rows(3000, 16, 5)
    backend = LanceDBBackend(tmp_path / "lance", "t", exact_max_chunks=2000)
    backend.ensure(16)
    backend.upsert([VectorPoint(i + 1, v, f"memory/{i % 30}.md") for i, v in enumerate(data)])
    assert not backend._vector_indexed()
    backend.flush()
    assert backend._vector_indexed()
    hits = backend.search(data[7], 300)  # more hits than the HNSW beam: still answered
    assert len(hits) == 300 and hits[0][0] == 8
    backend.close()
