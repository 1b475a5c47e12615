"""BM25 keyword index with a tokenizer for English and CJK text (character unigrams + bigrams)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable

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


def stem(word: str) -> str:
    """A light English suffix stripper: plurals, -ing, -ed, -ly; keeps short words intact."""
    if len(word) <= 3 or not word.isascii():
        return word
    for suffix, keep in (("'s", 2), ("ies", 3), ("ing", 4), ("ed", 4), ("ly", 4), ("es", 4)):
        if word.endswith(suffix) and len(word) - len(suffix) >= keep:
            base = word[: -len(suffix)]
            if suffix == "ies":
                return base + "y"
            if suffix in ("ing", "ed") and len(base) > 2 and base[-1] == base[-2]:
                base = base[:-1]
            return base
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Lower-cased, stemmed English words without stopwords; CJK runs as unigrams and bigrams."""
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
        self._postings: dict[str, dict[int, int]] = {}
        self._lengths: dict[int, int] = {}
        self._total_length = 0

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, doc_id: int, text: str) -> None:
        if doc_id in self._lengths:
            self.remove(doc_id)
        terms = Counter(tokenize(text))
        for term, tf in terms.items():
            self._postings.setdefault(term, {})[doc_id] = tf
        length = sum(terms.values())
        self._lengths[doc_id] = length
        self._total_length += length

    def remove(self, doc_id: int) -> None:
        length = self._lengths.pop(doc_id, None)
        if length is None:
            return
        self._total_length -= length
        for term in list(self._postings):
            posting = self._postings[term]
            if posting.pop(doc_id, None) is not None and not posting:
                del self._postings[term]

    def remove_many(self, doc_ids: Iterable[int]) -> None:
        gone = {d for d in doc_ids if d in self._lengths}
        if not gone:
            return
        for doc_id in gone:
            self._total_length -= self._lengths.pop(doc_id)
        for term in list(self._postings):
            posting = self._postings[term]
            for doc_id in gone.intersection(posting):
                del posting[doc_id]
            if not posting:
                del self._postings[term]

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
