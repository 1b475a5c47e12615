"""The error of an LLM request that retries, keys and fallbacks did not save."""

from __future__ import annotations

from typing import Any


class LLMError(Exception):
    """The provider failed in a way retries did not fix; the message is safe to show. `status`
    and `code` are the provider's when it answered with an error status; `timed_out` when it
    did not answer (or finish) in time; `attempts`: each preset and key tried, when several were
    (agent/fallback.py)."""

    def __init__(
        self,
        message: str,
        status: int | None = None,
        code: str | None = None,
        timed_out: bool = False,
    ):
        super().__init__(message)
        self.status = status
        self.code = code
        self.timed_out = timed_out
        self.attempts: list[Any] = []
        self.shown = 0  # characters of the answer the user saw before it failed
