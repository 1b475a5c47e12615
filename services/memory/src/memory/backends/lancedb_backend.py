"""Backend on LanceDB, embedded: a table in a folder, vectors and a full-text index of the text."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memory.backends.base import DEFAULT_EXACT_MAX_CHUNKS, VectorPoint, mismatch

log = logging.getLogger(__name__)

# Rows per write: LanceDB writes one fragment per call, so fewer, larger calls.
BATCH = 4096
# MEMORY_EXACT_SEARCH_MAX_CHUNKS=0 ("the store's default"): LanceDB has none; its IVF partitions
# need a few thousand rows to train, so an index from this many.
INDEX_DEFAULT_MIN_ROWS = 5_000
# HNSW search breadth, at least the candidates the exact refine re-ranks (LanceDB requires it).
EF_SEARCH = 256
REFINE_FACTOR = 4


def _quoted(text: str) -> str:
    """A string literal for LanceDB's SQL filter (single quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


def _path_filter(paths: Sequence[str]) -> str:
    return f"path IN ({', '.join(_quoted(p) for p in paths)})"


class LanceDBBackend:
    """A LanceDB table (`id`, `path`, `source`, `text`, `vector`). Without a vector index LanceDB
    scans every vector (exact); above `exact_max_chunks` `flush` builds IVF_HNSW_SQ. The `text`
    column has LanceDB's own BM25 index (stems, stopwords), used with MEMORY_KEYWORD_INDEX=backend.
    """

    name = "lancedb"

    def __init__(
        self, folder: Path, table: str, exact_max_chunks: int = DEFAULT_EXACT_MAX_CHUNKS
    ) -> None:
        try:
            import lancedb
        except ImportError as exc:  # an optional extra: pip install 'crayfish-memory[lancedb]'
            raise RuntimeError(
                "MEMORY_BACKEND=lancedb needs the lancedb package (crayfish-memory[lancedb])"
            ) from exc
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.table_name = table
        self.exact_max_chunks = exact_max_chunks
        self.db: Any = lancedb.connect(str(folder))
        self.table: Any = None
        self._dirty = False
        self._text_indexed = False

    def _schema(self, dim: int) -> Any:
        import pyarrow as pa

        return pa.schema(
            [
                pa.field("id", pa.int64(), nullable=False),
                pa.field("path", pa.string()),
                pa.field("source", pa.string()),
                pa.field("text", pa.string()),
                pa.field("vector", pa.list_(pa.float32(), dim)),
            ]
        )

    def ensure(self, dim: int) -> None:
        if self.table_name in self.db.list_tables().tables:
            table = self.db.open_table(self.table_name)
            size = table.schema.field("vector").type.list_size
            if size != dim:
                raise mismatch(f"LanceDB table {self.folder}/{self.table_name}", size, dim)
            self.table = table
            self._text_indexed = any(i.index_type == "FTS" for i in table.list_indices())
            return
        self.table = self.db.create_table(self.table_name, schema=self._schema(dim))

    @property
    def _table(self) -> Any:
        if self.table is None:
            raise RuntimeError("backend not opened: call ensure(dim) first")
        return self.table

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        import pyarrow as pa

        schema = self._table.schema
        for start in range(0, len(points), BATCH):
            part = points[start : start + BATCH]
            vectors = np.stack([np.asarray(p.vector, dtype=np.float32) for p in part])
            data = pa.table(
                {
                    "id": pa.array([p.id for p in part], pa.int64()),
                    "path": [p.path for p in part],
                    "source": [p.source for p in part],
                    "text": [p.text for p in part],
                    "vector": pa.FixedSizeListArray.from_arrays(
                        pa.array(vectors.reshape(-1)), vectors.shape[1]
                    ),
                },
                schema=schema,
            )
            merge = self._table.merge_insert("id")
            merge.when_matched_update_all().when_not_matched_insert_all().execute(data)
        self._dirty = self._dirty or bool(points)

    def delete(self, ids: Sequence[int]) -> None:
        if ids:
            self._table.delete(f"id IN ({', '.join(str(int(i)) for i in ids)})")
            self._dirty = True

    def search(
        self, vector: np.ndarray, limit: int, paths: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        if paths is not None and not paths:
            return []
        query = self._table.search(
            np.asarray(vector, dtype=np.float32), vector_column_name="vector"
        )
        query = query.distance_type("cosine").limit(limit).select(["id", "_distance"])
        if paths is not None:
            query = query.where(_path_filter(paths), prefilter=True)
        if self._vector_indexed():
            # Recall over speed, as in Qdrant Edge's hnsw_ef 256; refine re-ranks exactly.
            ef = max(EF_SEARCH, limit * REFINE_FACTOR)
            query = query.nprobes(32).ef(ef).refine_factor(REFINE_FACTOR)
        rows = query.to_arrow().to_pydict()
        return [
            (int(i), 1.0 - float(d)) for i, d in zip(rows["id"], rows["_distance"], strict=True)
        ]

    def keyword_search(
        self, query: str, limit: int, paths: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """LanceDB's BM25 over `text`; rows added since the index was built are scanned too."""
        if (paths is not None and not paths) or not query.strip() or not self._text_indexed:
            return []
        search = self._table.search(query, query_type="fts", fts_columns="text")
        search = search.limit(limit).select(["id", "_score"])
        if paths is not None:
            search = search.where(_path_filter(paths), prefilter=True)
        rows = search.to_arrow().to_pydict()
        return [(int(i), float(s)) for i, s in zip(rows["id"], rows["_score"], strict=True)]

    def _vector_indexed(self) -> bool:
        return any(i.index_type != "FTS" for i in self._table.list_indices())

    def indexed(self) -> bool:
        """Whether the vector index exists (searches are approximate)."""
        return self._vector_indexed()

    def count(self) -> int:
        return int(self._table.count_rows())

    def flush(self) -> None:
        """Builds the text index once, the vector index past `exact_max_chunks`, and compacts."""
        if not self._dirty:
            return
        from lancedb.index import FTS, IvfHnswSq

        table = self._table
        if not self._text_indexed and table.count_rows():
            table.create_index("text", config=FTS(), replace=True)
            self._text_indexed = True
        rows = table.count_rows()
        big = rows > (self.exact_max_chunks or INDEX_DEFAULT_MIN_ROWS)
        if big and not self._vector_indexed():
            log.info("lancedb: %d vectors, building IVF_HNSW_SQ", rows)
            table.create_index("vector", config=IvfHnswSq(distance_type="cosine"), replace=True)
        # Merges small fragments, folds new rows into both indexes and drops old versions.
        table.optimize(cleanup_older_than=timedelta(minutes=10))
        self._dirty = False

    def close(self) -> None:
        if self.table is not None:
            self.flush()
            self.table = None

    def drop(self) -> None:
        """Removes the table (the eval's temporary stores)."""
        self.db.drop_table(self.table_name, ignore_missing=True)
        self.table = None
