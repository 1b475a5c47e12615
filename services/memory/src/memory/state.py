"""SQLite state beside the vectors: which files and chunks are indexed, and the embedding cache."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memory.chunking import Chunk


@dataclass(frozen=True)
class StoredChunk:
    """A chunk as indexed: its point id in the vector backend plus what a hit shows."""

    id: int
    path: str
    source: str
    start_line: int
    end_line: int
    hash: str
    text: str
    embed_text: str


class StateStore:
    """Which files (by content hash) and chunks the index holds."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._lock = threading.Lock()
        # A state file from before may also hold a `meta` table; nothing reads it any more.
        self._db.executescript(
            """
            PRAGMA journal_mode=WAL;
            CREATE TABLE IF NOT EXISTS files (
                path TEXT PRIMARY KEY, source TEXT NOT NULL, hash TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS chunks (
                id INTEGER PRIMARY KEY, path TEXT NOT NULL, source TEXT NOT NULL,
                start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, hash TEXT NOT NULL,
                text TEXT NOT NULL, embed_text TEXT NOT NULL);
            CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
            """
        )

    def file_hashes(self) -> dict[str, str]:
        return {p: h for p, h in self._db.execute("SELECT path, hash FROM files")}

    def chunk_ids(self, path: str) -> list[int]:
        return [r[0] for r in self._db.execute("SELECT id FROM chunks WHERE path=?", (path,))]

    def all_chunks(self) -> list[StoredChunk]:
        rows = self._db.execute(
            "SELECT id, path, source, start_line, end_line, hash, text, embed_text FROM chunks"
        )
        return [StoredChunk(*row) for row in rows]

    def replace_file(
        self, path: str, source: str, file_hash: str, chunks: list[tuple[int, Chunk]]
    ) -> None:
        rows = [
            (i, c.path, c.source, c.start_line, c.end_line, c.hash, c.text, c.embed_text)
            for i, c in chunks
        ]
        with self._lock, self._db:
            self._db.execute("DELETE FROM chunks WHERE path=?", (path,))
            self._db.executemany("INSERT OR REPLACE INTO chunks VALUES (?,?,?,?,?,?,?,?)", rows)
            self._db.execute(
                "INSERT OR REPLACE INTO files VALUES (?, ?, ?)", (path, source, file_hash)
            )

    def remove_file(self, path: str) -> None:
        with self._lock, self._db:
            self._db.execute("DELETE FROM chunks WHERE path=?", (path,))
            self._db.execute("DELETE FROM files WHERE path=?", (path,))

    def counts(self) -> tuple[int, int]:
        files = self._db.execute("SELECT COUNT(*) FROM files").fetchone()[0]
        chunks = self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        return int(files), int(chunks)

    def close(self) -> None:
        self._db.close()


class EmbeddingCache:
    """Vectors by (model, content hash), so unchanged text is never embedded twice."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._lock = threading.Lock()
        self._db.executescript(
            """
            PRAGMA journal_mode=WAL;
            CREATE TABLE IF NOT EXISTS embeddings (
                model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL,
                PRIMARY KEY (model, hash));
            """
        )

    def get_many(self, model: str, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        wanted = list(dict.fromkeys(hashes))
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = self._db.execute(
                f"SELECT hash, vector FROM embeddings WHERE model=? AND hash IN ({marks})",
                (model, *part),
            )
            for h, blob in rows:
                found[h] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        rows = [(model, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in items.items()]
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?)", rows)

    def close(self) -> None:
        self._db.close()
