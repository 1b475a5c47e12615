"""An example memory backend: numpy brute-force cosine search, persisted as one .npz file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from memory.backends import BackendContext, VectorPoint
from memory.backends.base import mismatch


def make_backend(context: BackendContext) -> NumpyBackend:
    """The entry point: `crayfish.memory_backends` → `example-numpy`."""
    return NumpyBackend(context.folder / "example-numpy")


class NumpyBackend:
    """Every vector in memory; `flush` writes them to `vectors.npz` (temp file, then rename)."""

    name = "example-numpy"

    def __init__(self, folder: Path) -> None:
        self.file = folder / "vectors.npz"
        self.dim = 0
        self.rows: dict[int, tuple[np.ndarray, str]] = {}

    def ensure(self, dim: int) -> None:
        if self.file.exists():
            with np.load(self.file) as saved:
                ids, vectors, paths = saved["ids"], saved["vectors"], saved["paths"]
            if vectors.shape[1] != dim:
                raise mismatch(f"example store {self.file}", int(vectors.shape[1]), dim)
            self.rows = {int(i): (v, str(p)) for i, v, p in zip(ids, vectors, paths, strict=True)}
        self.dim = dim

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        for p in points:
            vector = np.asarray(p.vector, dtype=np.float32)
            self.rows[p.id] = (vector / (np.linalg.norm(vector) or 1.0), p.path)

    def delete(self, ids: Sequence[int]) -> None:
        for i in ids:
            self.rows.pop(i, None)

    def search(
        self, vector: np.ndarray, limit: int, paths: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        allowed = None if paths is None else set(paths)
        ids = [i for i, (_, path) in self.rows.items() if allowed is None or path in allowed]
        if not ids:
            return []
        matrix = np.stack([self.rows[i][0] for i in ids])
        query = np.asarray(vector, dtype=np.float32)
        scores = matrix @ (query / (np.linalg.norm(query) or 1.0))
        best = np.argsort(-scores, kind="stable")[:limit]
        return [(ids[b], float(scores[b])) for b in best]

    def count(self) -> int:
        return len(self.rows)

    def flush(self) -> None:
        self.file.parent.mkdir(parents=True, exist_ok=True)
        ids = np.array(list(self.rows), dtype=np.int64)
        vectors = np.stack([v for v, _ in self.rows.values()]) if self.rows else None
        temp = self.file.with_suffix(".tmp.npz")
        np.savez(
            temp,
            ids=ids,
            vectors=vectors if vectors is not None else np.zeros((0, self.dim), np.float32),
            paths=np.array([p for _, p in self.rows.values()], dtype=str),
        )
        temp.replace(self.file)

    def close(self) -> None:
        self.flush()
