"""Recent search results by query, kept briefly: a model that repeats a search (or two turns
that ask the same) costs the provider one call."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class TtlCache(Generic[T]):
    """At most `size` entries, each for `ttl` seconds (0: nothing is kept); least recently used
    goes first."""

    def __init__(self, ttl: float, size: int, clock: Callable[[], float] = time.monotonic):
        self.ttl = ttl
        self.size = size
        self.clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, T]] = OrderedDict()

    def get(self, key: Hashable) -> T | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        stored_at, value = entry
        if self.clock() - stored_at >= self.ttl:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, key: Hashable, value: T) -> None:
        if self.ttl <= 0 or self.size <= 0:
            return
        self._entries[key] = (self.clock(), value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
