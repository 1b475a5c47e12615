"""The memory index: incremental sync of files into chunks, vectors and BM25, and removal."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from crayfish_common.safe_files import FileRefused, SafeRoot

from memory.backends import VectorBackend, VectorPoint
from memory.chunking import Chunk, ChunkParams, chunk_lines
from memory.embedder import Embedder
from memory.keyword import BM25Index
from memory.sources import Discovery, SourceFile, discover, read_bytes, to_lines
from memory.state import EmbeddingCache, StateStore, StoredChunk

log = logging.getLogger(__name__)

EMBED_BATCH = 256


@dataclass
class SyncReport:
    """What one sync changed."""

    files_indexed: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    chunks_indexed: int = 0
    chunks_embedded: int = 0
    duration_ms: float = 0.0
    # Files found but left out (a link leaving the workspace, a FIFO, ...): path -> reason.
    skipped: dict[str, str] = field(default_factory=dict)


@dataclass
class IndexConfig:
    """Where the sources are and how to chunk them."""

    workspace: Path
    sessions_dir: Path | None = None
    chunk: ChunkParams = field(default_factory=ChunkParams)
    # New and rewritten notes get this owner (the sandbox's, when the service runs as root).
    owner: tuple[int, int] | None = None

    def roots(self) -> tuple[SafeRoot, SafeRoot | None]:
        """The workspace and the transcripts folder, as roots nothing read may leave."""
        sessions = None
        if self.sessions_dir is not None:
            sessions = SafeRoot(self.sessions_dir, label="sessions folder")
        return SafeRoot(self.workspace, self.owner), sessions


def point_id(chunk: Chunk) -> int:
    key = f"{chunk.path}\0{chunk.start_line}\0{chunk.end_line}\0{chunk.hash}"
    return int(hashlib.sha256(key.encode()).hexdigest()[:15], 16)


class MemoryIndex:
    """Chunks in memory (for BM25 and hits), vectors in a backend, state in SQLite."""

    def __init__(
        self,
        config: IndexConfig,
        embedder: Embedder,
        backend: VectorBackend,
        state: StateStore,
        cache: EmbeddingCache,
    ) -> None:
        self.config = config
        self.embedder = embedder
        self.backend = backend
        self.state = state
        self.cache = cache
        self.lock = threading.RLock()
        self.ready = threading.Event()
        self.chunks: dict[int, StoredChunk] = {}
        self.bm25 = BM25Index()
        self._lines: dict[str, list[str]] = {}
        self.roots = config.roots()
        self.skipped: dict[str, str] = {}
        backend.ensure(embedder.dim)
        for chunk in state.all_chunks():
            self.chunks[chunk.id] = chunk
            self.bm25.add(chunk.id, chunk.embed_text)

    def sources(self) -> Discovery:
        return discover(*self.roots)

    def sync(self, force: bool = False, only: set[str] | None = None) -> SyncReport:
        """Brings the index up to date: changed files re-embed, deleted files leave it."""
        started = time.perf_counter()
        report = SyncReport()
        with self.lock:
            found = self.sources()
            report.skipped.update(found.skipped)
            known = self.state.file_hashes()
            for path in sorted(set(known) - set(found.files)):
                if only is None or path in only:
                    self._drop(path)
                    report.files_removed += 1
            todo: list[tuple[SourceFile, str, list[str], list[Chunk]]] = []
            for path, source in found.files.items():
                if only is not None and path not in only:
                    continue
                try:
                    data = read_bytes(source)
                except FileRefused as exc:
                    # What a refused file said before it changed is no longer the user's note.
                    if path in known:
                        self._drop(path)
                        report.files_removed += 1
                    if exc.kind != "missing":
                        report.skipped[path] = str(exc)
                    continue
                digest = hashlib.sha256(data).hexdigest()
                if not force and known.get(path) == digest:
                    report.files_unchanged += 1
                    continue
                lines = to_lines(source, data)
                todo.append((source, digest, lines, self._chunk(source, lines)))
            vectors = self._vectors([c for *_, chunks in todo for c in chunks], report)
            for source, digest, lines, chunks in todo:
                self._apply(source, digest, chunks, vectors)
                self._lines[source.path] = lines
                report.files_indexed += 1
                report.chunks_indexed += len(chunks)
            self.backend.flush()
            if only is None:
                self.skipped = dict(report.skipped)
            else:
                kept = {p: r for p, r in self.skipped.items() if p not in only}
                self.skipped = kept | report.skipped
        report.duration_ms = (time.perf_counter() - started) * 1000
        if report.files_indexed or report.files_removed:
            log.info("sync: %s", report)
        for reason in report.skipped.values():
            log.warning("not indexed: %s", reason)
        return report

    def _chunk(self, source: SourceFile, lines: list[str]) -> list[Chunk]:
        count = self.embedder.count_tokens
        return chunk_lines(source.path, lines, count, self.config.chunk, source.source)

    def _vectors(self, chunks: list[Chunk], report: SyncReport) -> dict[str, np.ndarray]:
        """Vectors by content hash: from the cache, the rest embedded in batches and cached."""
        model = self.embedder.name
        vectors = self.cache.get_many(model, (c.hash for c in chunks))
        missing = {c.hash: c.embed_text for c in chunks if c.hash not in vectors}
        items = list(missing.items())
        for start in range(0, len(items), EMBED_BATCH):
            part = items[start : start + EMBED_BATCH]
            embedded = self.embedder.embed_documents([text for _, text in part])
            fresh = {h: embedded[i] for i, (h, _) in enumerate(part)}
            self.cache.put_many(model, fresh)
            vectors.update(fresh)
        report.chunks_embedded += len(items)
        return vectors

    def _apply(
        self, source: SourceFile, digest: str, chunks: list[Chunk], vectors: dict[str, np.ndarray]
    ) -> None:
        numbered = [(point_id(c), c) for c in chunks]
        old = set(self.state.chunk_ids(source.path))
        new_ids = {i for i, _ in numbered}
        points = [
            VectorPoint(i, vectors[c.hash], c.path, c.source, c.embed_text) for i, c in numbered
        ]
        self.backend.upsert(points)
        self.backend.delete(sorted(old - new_ids))
        self.state.replace_file(source.path, source.source, digest, numbered)
        self.bm25.remove_many(old)
        for i in old:
            self.chunks.pop(i, None)
        for i, c in numbered:
            stored = StoredChunk(
                i, c.path, c.source, c.start_line, c.end_line, c.hash, c.text, c.embed_text
            )
            self.chunks[i] = stored
            self.bm25.add(i, c.embed_text)

    def file_lines(self, path: str) -> list[str]:
        """The lines of an indexed file as last indexed (read from disk after a restart)."""
        lines = self._lines.get(path)
        if lines is None:
            source = self.sources().files.get(path)
            try:
                lines = to_lines(source, read_bytes(source)) if source else []
            except FileRefused:
                lines = []
            self._lines[path] = lines
        return lines

    def _drop(self, path: str) -> int:
        self._lines.pop(path, None)
        ids = self.state.chunk_ids(path)
        self.backend.delete(ids)
        self.state.remove_file(path)
        self.bm25.remove_many(ids)
        for i in ids:
            self.chunks.pop(i, None)
        return len(ids)

    def remove(self, path: str) -> int:
        """Takes one file's chunks out of the index; returns how many."""
        with self.lock:
            removed = self._drop(path)
            self.backend.flush()
            return removed

    def close(self) -> None:
        with self.lock:
            self.backend.close()
            self.state.close()
            self.cache.close()
