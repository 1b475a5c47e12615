"""BM25 keyword index; tokens: Snowball-stemmed English words, CJK character unigrams + bigrams.

BM25 is written here, not taken from rank_bm25 or bm25s: those build a static index, while this
one adds, replaces and removes single chunks in place and scores only the chunks a filter allows.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Iterable

import Stemmer

_CJK_CLASS = r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
_WORD = re.compile(rf"[0-9a-z\u00c0-\u024f]+(?:'[a-z]+)?|{_CJK_CLASS}+")
_CJK = re.compile(_CJK_CLASS)
STOPWORDS = frozenset(
    """a an and are as at be been being but by can could did do does doing for from had has have
    having he her hers him his how i if in into is it its itself me my of on or our ours she so
    than that the their theirs them then there these they this those to too us was we were what
    when where which while who whom why will with would you your yours am any all also just about
    after again against before both each few more most other over same some such only own very
    s t don should now""".split()
)
_local = threading.local()


def _stemmer() -> Stemmer.Stemmer:
    """English Snowball (Porter2): meeting, meetings -> meet; decide, decided -> decid.

    A stemmer keeps state while it works, so each thread has its own.
    """
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer


def tokenize(text: str) -> list[str]:
    """Lower-cased, stemmed English words without stopwords; CJK runs as unigrams and bigrams."""
    stem = _stemmer().stemWord
    terms: list[str] = []
    for match in _WORD.finditer(text.lower()):
        token = match.group(0)
        if _CJK.match(token):
            terms.extend(token)
            terms.extend(token[i : i + 2] for i in range(len(token) - 1))
        elif token not in STOPWORDS:
            terms.append(stem(token))
    return terms


class BM25Index:
    """An incremental in-memory BM25 (Okapi) index over documents keyed by integer id."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._postings: dict[str, dict[int, int]] = {}  # term -> {document: term frequency}
        # document -> its distinct terms, so that removing it touches only their postings
        self._terms: dict[int, tuple[str, ...]] = {}
        self._lengths: dict[int, int] = {}
        self._total_length = 0

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, doc_id: int, text: str) -> None:
        self.remove(doc_id)
        terms = Counter(tokenize(text))
        for term, tf in terms.items():
            self._postings.setdefault(term, {})[doc_id] = tf
        self._terms[doc_id] = tuple(terms)
        length = terms.total()
        self._lengths[doc_id] = length
        self._total_length += length

    def remove(self, doc_id: int) -> None:
        terms = self._terms.pop(doc_id, None)
        if terms is None:
            return
        self._total_length -= self._lengths.pop(doc_id)
        for term in terms:
            posting = self._postings[term]
            del posting[doc_id]
            if not posting:
                del self._postings[term]

    def remove_many(self, doc_ids: Iterable[int]) -> None:
        for doc_id in doc_ids:
            self.remove(doc_id)

    def idf(self, term: str) -> float:
        df = len(self._postings.get(term, ()))
        n = len(self._lengths)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def search(
        self, query: str, limit: int, allowed: set[int] | None = None
    ) -> list[tuple[int, float]]:
        """Top documents as (id, score in [0, 1]): BM25 over the best score the query could get."""
        terms = Counter(tokenize(query))
        if not terms or not self._lengths:
            return []
        avg = self._total_length / len(self._lengths) or 1.0
        scores: dict[int, float] = {}
        ceiling = 0.0
        for term, q_tf in terms.items():
            idf = self.idf(term)
            ceiling += q_tf * idf * (self.k1 + 1)
            for doc_id, tf in self._postings.get(term, {}).items():
                if allowed is not None and doc_id not in allowed:
                    continue
                norm = tf + self.k1 * (1 - self.b + self.b * self._lengths[doc_id] / avg)
                scores[doc_id] = scores.get(doc_id, 0.0) + q_tf * idf * tf * (self.k1 + 1) / norm
        if ceiling <= 0:
            return []
        ranked = sorted(scores.items(), key=lambda item: item[1], reverse=True)[:limit]
        return [(doc_id, min(1.0, score / ceiling)) for doc_id, score in ranked]
