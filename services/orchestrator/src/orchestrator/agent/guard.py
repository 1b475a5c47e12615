"""Detects runaway tool loops: the same call over and over, or near-identical variations."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from difflib import SequenceMatcher
from typing import Any


def call_key(name: str, arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):  # compared as text, then
            pass
    try:
        canonical = json.dumps(arguments, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        canonical = str(arguments)
    return f"{name}:{canonical}"


class RepeatGuard:
    """Counts the calls of one run; `check` returns a reason to stop, or None.

    Two rules: the same tool with the same arguments `exact_limit` times; or near-identical
    arguments (similarity >= `similarity`) that keep giving the same result `similar_limit`
    times. The result matters: reading chapter-1.md … chapter-9.md is progress, not a loop.
    """

    def __init__(self, exact_limit: int = 3, similar_limit: int = 4, similarity: float = 0.9):
        self.exact_limit = exact_limit
        self.similar_limit = similar_limit
        self.similarity = similarity
        self.exact: Counter[str] = Counter()
        self.history: list[tuple[str, str, str]] = []

    def check(self, name: str, arguments: Any, result: str = "") -> str | None:
        key = call_key(name, arguments)
        digest = hashlib.sha256(result.encode("utf-8", "replace")).hexdigest()
        self.exact[key] += 1
        if self.exact[key] >= self.exact_limit:
            return f"`{name}` was called {self.exact[key]} times with the same arguments"
        similar = 1 + sum(
            1
            for other_name, other_key, other_digest in self.history
            if other_name == name
            and other_digest == digest
            and SequenceMatcher(None, key, other_key).ratio() >= self.similarity
        )
        self.history.append((name, key, digest))
        if similar >= self.similar_limit:
            return (
                f"`{name}` was called {similar} times with nearly the same arguments "
                "and the same result"
            )
        return None
