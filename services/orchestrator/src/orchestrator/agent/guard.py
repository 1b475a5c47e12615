"""Detects runaway tool loops: the same call over and over, or near-identical variations."""

from __future__ import annotations

import json
from collections import Counter
from difflib import SequenceMatcher
from typing import Any


def call_key(name: str, arguments: Any) -> str:
    try:
        canonical = json.dumps(arguments, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        canonical = str(arguments)
    return f"{name}:{canonical}"


class RepeatGuard:
    """Counts calls in one run; `check` returns a reason to stop, or None."""

    def __init__(self, exact_limit: int = 3, similar_limit: int = 5, similarity: float = 0.92):
        self.exact_limit = exact_limit
        self.similar_limit = similar_limit
        self.similarity = similarity
        self.exact: Counter[str] = Counter()
        self.history: list[tuple[str, str]] = []

    def check(self, name: str, arguments: Any) -> str | None:
        key = call_key(name, arguments)
        self.exact[key] += 1
        if self.exact[key] >= self.exact_limit:
            return f"`{name}` was called {self.exact[key]} times with the same arguments"
        similar = 1 + sum(
            1
            for other_name, other in self.history
            if other_name == name and SequenceMatcher(None, key, other).ratio() >= self.similarity
        )
        self.history.append((name, key))
        if similar >= self.similar_limit:
            return f"`{name}` was called {similar} times with nearly the same arguments"
        return None
