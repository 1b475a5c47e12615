"""One platform call, tried again while the platform asks to wait (its 429 `retry_after`, or a
timeout), up to a number of attempts; a refusal for good (PlatformRefused) ends it at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from channels.contract import RetryLater

MAX_WAIT = 300.0  # the longest retry_after waited out for one attempt
Call = Callable[[], Awaitable[object]]


class GaveUp(Exception):
    """A call did not succeed within the attempts."""


async def attempt(call: Call, attempts: int) -> None:
    """Calls until it returns; GaveUp after `attempts` waits asked for, PlatformRefused."""
    for number in range(1, attempts + 1):
        try:
            await call()
            return
        except RetryLater as exc:
            if number == attempts:
                raise GaveUp(f"gave up after {number} attempts: {exc}") from exc
            await asyncio.sleep(min(max(exc.retry_after, 0.0), MAX_WAIT))
