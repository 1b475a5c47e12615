"""A preset's API keys: the one in use until it fails, then the next that is not cooling down.
A rate limit or a refused key cools a key 1 min, doubling with each failure in a row up to 1 h; a
quota or billing refusal cools it 5 h. Kept in memory: each replica learns a key's state by its
own first failure, which costs one request, not a round trip to the store per LLM call.
Sticky rather than round-robin: a provider's prompt cache is kept per key (or its account)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

FIRST_COOLDOWN = 60.0
MAX_COOLDOWN = 3600.0
QUOTA_COOLDOWN = 5 * 3600.0


@dataclass
class _KeyState:
    failures: int = 0
    ready_at: float = 0.0


class KeyRing:
    """Which of `count` keys to use now; told of each failure and success."""

    def __init__(self, count: int, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.current = 0
        self.states = [_KeyState() for _ in range(max(count, 1))]

    def available(self) -> list[int]:
        """The keys not cooling down, the one in use first, then in order after it."""
        now = self.clock()
        n = len(self.states)
        order = [(self.current + i) % n for i in range(n)]
        return [i for i in order if self.states[i].ready_at <= now]

    def soonest(self) -> tuple[int, float]:
        """The key whose cooldown ends first, and the seconds until then."""
        index = min(range(len(self.states)), key=lambda i: self.states[i].ready_at)
        return index, max(0.0, self.states[index].ready_at - self.clock())

    def failed(self, index: int, quota: bool) -> float:
        """Cools the key down; returns for how many seconds."""
        state = self.states[index]
        state.failures += 1
        if quota:
            cooldown = QUOTA_COOLDOWN
        else:
            cooldown = min(FIRST_COOLDOWN * 2 ** (state.failures - 1), MAX_COOLDOWN)
        state.ready_at = self.clock() + cooldown
        return cooldown

    def rekeyed(self, before: list[object], after: list[object]) -> KeyRing:
        """A ring for the keys `after` (identified as in `before`): a key kept keeps its state
        and stays in use; a new or changed key starts fresh."""
        ring = KeyRing(len(after), self.clock)
        for index, key in enumerate(after):
            if key in before:
                ring.states[index] = self.states[before.index(key)]
        current = before[self.current] if self.current < len(before) else None
        ring.current = after.index(current) if current in after else 0
        return ring

    def succeeded(self, index: int) -> None:
        self.states[index] = _KeyState()
        self.current = index
