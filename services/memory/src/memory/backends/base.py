"""The small interface every vector backend implements, and the errors it raises."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class DimensionMismatchError(RuntimeError):
    """The store already holds vectors of another size: refuse rather than mix them."""


@dataclass(frozen=True)
class VectorPoint:
    """One chunk's vector with the payload needed to filter by file."""

    id: int
    vector: np.ndarray
    path: str
    source: str = "memory"


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


def mismatch(store: str, existing: int, wanted: int) -> DimensionMismatchError:
    return DimensionMismatchError(
        f"{store} holds {existing}-dimensional vectors but the embedding model makes "
        f"{wanted}-dimensional ones; refusing to mix them. Point MEMORY_DATA_DIR or the "
        f"collection at a fresh store, or switch back to the model that built it."
    )
