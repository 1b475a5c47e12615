"""Memory's BM25 index: tokenize throughput and the cost of removing one file's chunks.

Tokenizes 5,000 ~700-character chunks of generated dialogue (Snowball stems), then fills an
index of 20,000 chunks over a 100,000-term vocabulary and times removing 20 files of 5 chunks,
which touches only the removed chunks' terms.
"""

from __future__ import annotations

import random
import time

from memory.keyword import BM25Index, tokenize

WORDS = (
    "meeting meetings decided decide painting painted hiking hikes adopted adoption family "
    "friends support group conference camping beach sunrise pottery class kids school library "
    "running marathon guitar concert birthday surprise recipe garden tomatoes basil passport"
).split()


def main() -> None:
    rng = random.Random(1)
    chunks = [" ".join(rng.choices(WORDS, k=110))[:700] for _ in range(5000)]
    started = time.perf_counter()
    terms = sum(len(tokenize(chunk)) for chunk in chunks)
    took = time.perf_counter() - started
    print(f"tokenize: {len(chunks)} chunks, {terms} terms in {took * 1000:.0f} ms")
    print(f"          {took / len(chunks) * 1e6:.0f} us per chunk")

    vocab = [f"term{n}x" for n in range(100_000)]
    index = BM25Index()
    for doc_id in range(20_000):
        index.add(doc_id, " ".join(rng.choices(vocab, k=80)))
    started = time.perf_counter()
    for file in range(20):
        index.remove_many(range(file * 5, file * 5 + 5))
    took = (time.perf_counter() - started) / 20
    print(f"remove:   {took * 1000:.2f} ms per file of 5 chunks (20,000 chunks indexed)")


if __name__ == "__main__":
    main()
