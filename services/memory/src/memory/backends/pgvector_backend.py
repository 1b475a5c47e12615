"""Backend on PostgreSQL + pgvector: one table per collection in a schema of its own.

The memory service calls backends from worker threads (`asyncio.to_thread`), so this one holds a
thread-safe psycopg pool rather than an async one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool

from memory.backends.base import DEFAULT_EXACT_MAX_CHUNKS, VectorPoint, mismatch

log = logging.getLogger(__name__)

# Apart from the orchestrator's tables (public schema), so both can share one database.
SCHEMA = "crayfish_vectors"
BATCH = 2048
# PostgreSQL cuts identifiers at 63 bytes; index names add a suffix.
MAX_COLLECTION = 50
# HNSW search breadth (pgvector's default is 40): memory wants recall, as with Qdrant Edge's 256.
EF_SEARCH = 256
BUILD_MEMORY = "512MB"


def redacted(url: str) -> str:
    """The URL without its password, for messages and logs."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "(unparsable MEMORY_DATABASE_URL)"
    info.pop("password", None)
    return make_conninfo("", **info)


class PgvectorBackend:
    """Table `crayfish_vectors.<collection>` (id, path, source, embedding vector(dim)). Without an
    index PostgreSQL scans every vector (exact); `flush` builds HNSW (vector_cosine_ops) once the
    table holds more than `exact_max_chunks` vectors (0: always), and drops it below."""

    name = "pgvector"

    def __init__(
        self,
        url: str,
        collection: str,
        exact_max_chunks: int = DEFAULT_EXACT_MAX_CHUNKS,
        pool_size: int = 4,
    ) -> None:
        if not collection or len(collection) > MAX_COLLECTION:
            raise ValueError(f"collection name must have 1-{MAX_COLLECTION} characters")
        self.collection = collection
        self.exact_max_chunks = exact_max_chunks
        self.where = redacted(url)
        self.table = sql.Identifier(SCHEMA, collection)
        self.hnsw = sql.Identifier(f"{collection}_hnsw")
        self._prepare(url)
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            configure=_register_vector,
            name="memory-pgvector",
            open=False,
        )
        try:
            self.pool.open(wait=True, timeout=30)
        except Exception as exc:
            self.pool.close()
            raise RuntimeError(f"cannot connect to PostgreSQL at {self.where}: {exc}") from exc
        self._dirty = False

    def _prepare(self, url: str) -> None:
        """The vector extension and the schema, before any pooled connection registers the type."""
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=30) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(SCHEMA))
                )
        except psycopg.errors.InsufficientPrivilege as exc:
            raise RuntimeError(
                f"PostgreSQL at {self.where} lacks the vector extension and this user may not "
                f"create it: run `CREATE EXTENSION vector` there as an administrator ({exc})"
            ) from exc
        except psycopg.errors.FeatureNotSupported as exc:
            raise RuntimeError(f"PostgreSQL at {self.where} has no pgvector: {exc}") from exc
        except psycopg.Error as exc:
            raise RuntimeError(f"cannot use PostgreSQL at {self.where}: {exc}") from exc

    def ensure(self, dim: int) -> None:
        qualified = f'"{SCHEMA}"."{self.collection}"'
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT atttypmod FROM pg_attribute"
                " WHERE attrelid = to_regclass(%s) AND attname = 'embedding'",
                [qualified],
            ).fetchone()
            if row is not None:
                if int(row[0]) != dim:
                    raise mismatch(f"pgvector table {SCHEMA}.{self.collection}", int(row[0]), dim)
                return
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (id bigint PRIMARY KEY, path text NOT NULL,"
                    " source text NOT NULL, embedding vector({}) NOT NULL)"
                ).format(self.table, sql.Literal(dim))
            )
            conn.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (path)").format(
                    sql.Identifier(f"{self.collection}_path"), self.table
                )
            )

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        """COPY into a temporary table, then one INSERT .. ON CONFLICT per batch."""
        with self.pool.connection() as conn:
            for start in range(0, len(points), BATCH):
                part = points[start : start + BATCH]
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute(
                        sql.SQL("CREATE TEMP TABLE staging (LIKE {}) ON COMMIT DROP").format(
                            self.table
                        )
                    )
                    copy_in = (
                        "COPY staging (id, path, source, embedding) FROM STDIN (FORMAT BINARY)"
                    )
                    with cur.copy(copy_in) as copy:
                        copy.set_types(["int8", "text", "text", "vector"])
                        for p in part:
                            vector = np.asarray(p.vector, dtype=np.float32)
                            copy.write_row((p.id, p.path, p.source, vector))
                    cur.execute(
                        sql.SQL(
                            "INSERT INTO {} SELECT * FROM staging ON CONFLICT (id) DO UPDATE SET"
                            " path = EXCLUDED.path, source = EXCLUDED.source,"
                            " embedding = EXCLUDED.embedding"
                        ).format(self.table)
                    )
        self._dirty = self._dirty or bool(points)

    def delete(self, ids: Sequence[int]) -> None:
        if ids:
            with self.pool.connection() as conn:
                conn.execute(
                    sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(self.table), [list(ids)]
                )
            self._dirty = True

    def search(
        self, vector: np.ndarray, limit: int, paths: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        if paths is not None and not paths:
            return []
        where = sql.SQL("WHERE path = ANY(%(paths)s)" if paths is not None else "")
        query = sql.SQL(
            "SELECT id, 1 - (embedding <=> %(q)s) FROM {} {}"
            " ORDER BY embedding <=> %(q)s LIMIT %(n)s"
        ).format(self.table, where)
        params: dict[str, Any] = {"q": np.asarray(vector, dtype=np.float32), "n": limit}
        if paths is not None:
            params["paths"] = list(paths)
        with self.pool.connection() as conn, conn.transaction():
            # Only matters once an HNSW index exists: a wider beam, and with a path filter the
            # scan goes on until `limit` rows pass it (pgvector 0.8 iterative scans).
            conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(max(EF_SEARCH, limit)))
            conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
            rows = conn.execute(query, params).fetchall()
        return [(int(i), float(score)) for i, score in rows]

    def count(self) -> int:
        with self.pool.connection() as conn:
            row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(self.table)).fetchone()
        return int(row[0]) if row else 0

    def indexed(self) -> bool:
        """Whether the HNSW index exists (searches are approximate)."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT 1 FROM pg_indexes WHERE schemaname = %s AND indexname = %s",
                [SCHEMA, f"{self.collection}_hnsw"],
            ).fetchone()
        return row is not None

    def flush(self) -> None:
        """HNSW past `exact_max_chunks` vectors, none below (writes are durable at commit)."""
        if not self._dirty:
            return
        self._dirty = False
        want = self.count() > self.exact_max_chunks if self.exact_max_chunks > 0 else True
        have = self.indexed()
        if want == have:
            return
        hnsw = sql.Identifier(SCHEMA, f"{self.collection}_hnsw")
        with self.pool.connection() as conn, conn.transaction():
            if want:
                log.info("pgvector: building HNSW on %s.%s", SCHEMA, self.collection)
                # A graph outgrowing this memory builds far more slowly (100k x 384-d: ~200 MB).
                conn.execute(
                    sql.SQL("SET LOCAL maintenance_work_mem = {}").format(sql.Literal(BUILD_MEMORY))
                )
                conn.execute(
                    sql.SQL(
                        "CREATE INDEX IF NOT EXISTS {} ON {}"
                        " USING hnsw (embedding vector_cosine_ops)"
                    ).format(self.hnsw, self.table)
                )
            else:
                conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(hnsw))

    def close(self) -> None:
        self.flush()
        self.pool.close()

    def drop(self) -> None:
        """Removes the table (the eval's temporary stores)."""
        with self.pool.connection() as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(self.table))
        self._dirty = False  # nothing left to index: close() after drop() has nothing to do


def _register_vector(conn: psycopg.Connection[Any]) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)
