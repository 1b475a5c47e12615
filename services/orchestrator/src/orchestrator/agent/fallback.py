"""Which LLM failures move a request on to the next key or preset, and the error that lists each
attempt when none served it. Moved on: a timeout, a failed connection or broken stream, a 5xx,
a 408/409, a rate limit (429), a refused key (401/403), a quota or billing refusal (402, or
codes such as `insufficient_quota`). Not moved on: any other 4xx (a malformed request, a content
filter, a context too long, an unknown model), which another model would refuse alike or which
the client must see; and never once text of the answer was shown."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from orchestrator.agent.key_ring import KeyRing
from orchestrator.agent.llm_error import LLMError
from orchestrator.agent.presets import ModelPreset, Presets

log = logging.getLogger(__name__)
Reply = TypeVar("Reply")
# One request: the preset, the index of its key, and whether anything is left to try after it.
AskOne = Callable[[ModelPreset, int, bool], Awaitable[Reply]]

PROVIDER_COOLDOWN = 60.0  # seconds a preset whose provider failed is tried last

# What a failure says about where to go next: "key": this key is refused or limited (cool it,
# try the preset's next key, then the next preset); "quota": the same, for hours; "provider":
# the provider is down or slow (the next preset); "final": nowhere (the request ends here).
Verdict = Literal["key", "quota", "provider", "final"]

QUOTA_CODES = frozenset(
    {
        "insufficient_quota",
        "quota_exceeded",
        "billing_hard_limit_reached",
        "billing_not_active",
        "insufficient_balance",
        "payment_required",
    }
)


def verdict(exc: LLMError, shown: int) -> Verdict:
    """Where a failed request may go next; `shown`: characters of it the user already saw."""
    if shown:
        return "final"  # a second answer would be appended to the first
    status = exc.status
    if (exc.code or "") in QUOTA_CODES or status == 402:
        return "quota"
    if status is None or status in (408, 409) or status >= 500:
        return "provider"
    if status in (401, 403, 429):
        return "key"
    return "final"


@dataclass(frozen=True)
class Attempt:
    """One request of a reply: the preset, the key's variable, and how it failed."""

    preset: str
    key: str
    failure: str

    def __str__(self) -> str:
        return f"{self.preset} ({self.key}): {self.failure}"


def every_attempt_failed(attempts: list[Attempt], last: LLMError) -> LLMError:
    """One error naming each attempt in order, with the last one's status, code and timing (what
    the failed-turn answer is chosen by: api/failed_turns.py)."""
    listed = "; ".join(f"{i}. {a}" for i, a in enumerate(attempts, 1))
    error = LLMError(
        f"no model could answer ({len(attempts)} attempts): {listed}",
        last.status,
        last.code,
        last.timed_out,
    )
    error.attempts = attempts
    return error


class Fallbacks:
    """The walk over a request's candidates (its preset, then the fallbacks) and their keys. A
    preset whose provider just failed is tried after the others for PROVIDER_COOLDOWN seconds,
    so the next rounds of a turn do not wait out its timeouts and retries again."""

    def __init__(self, presets: Presets, clock: Callable[[], float] = time.monotonic):
        self.presets = presets
        self.clock = clock
        self.rings = {p.name: KeyRing(len(p.keys), clock) for p in presets.by_name.values()}
        self.down_until: dict[str, float] = {}

    def use(self, presets: Presets) -> None:
        """New keys (the keys file changed): a changed key's cooldown starts over."""
        for preset in presets.by_name.values():
            before = self.presets[preset.name]
            if (before.key_names, before.keys) != (preset.key_names, preset.keys):
                self.rings[preset.name] = self.rings[preset.name].rekeyed(
                    list(zip(before.key_names, before.keys, strict=True)),
                    list(zip(preset.key_names, preset.keys, strict=True)),
                )
        self.presets = presets

    def _candidates(self, model: str) -> list[ModelPreset]:
        """The preset asked and the fallbacks, those whose provider just failed last."""
        listed = self.presets.candidates(self.presets.chosen(model).name)
        now = self.clock()
        return sorted(listed, key=lambda p: self.down_until.get(p.name, 0.0) > now)

    async def first_answer(
        self, model: str, ask: AskOne[Reply]
    ) -> tuple[Reply, ModelPreset, list[Attempt]]:
        """The first reply of `ask` over the candidates, its preset and the failed attempts
        before it; the LLMError of the one attempt, or one listing them all."""
        candidates = self._candidates(model)
        attempts: list[Attempt] = []
        errors: list[LLMError] = []
        for n, preset in enumerate(candidates):
            more = n + 1 < len(candidates)
            reply = await self._keys(preset, ask, more, attempts, errors)
            if reply is not None:
                return reply, preset, attempts
        if not errors:  # every key of every candidate is cooling down: the soonest, anyway
            preset = candidates[0]
            ring = self.rings[preset.name]
            key, _ = ring.soonest()
            reply = await ask(preset, key, False)
            ring.succeeded(key)
            return reply, preset, []
        raise _failed(attempts, errors[-1]) from errors[-1].__cause__

    async def _keys(
        self,
        preset: ModelPreset,
        ask: AskOne[Reply],
        more: bool,
        attempts: list[Attempt],
        errors: list[LLMError],
    ) -> Reply | None:
        """The preset's reply with the first key that gets one (None: go on to the next
        preset); raises for a failure that must not go on."""
        ring = self.rings[preset.name]
        keys = ring.available()
        if not keys:
            _, wait = ring.soonest()
            attempts.append(Attempt(preset.name, "every key", f"cooling down ({wait:.0f} s)"))
        for k, key in enumerate(keys):
            try:
                reply = await ask(preset, key, more or k + 1 < len(keys))
            except LLMError as exc:
                errors.append(exc)
                attempts.append(Attempt(preset.name, preset.key_label(key), str(exc)))
                found = verdict(exc, exc.shown)
                if found == "final":
                    raise _failed(attempts, exc) from exc.__cause__
                if found == "provider":
                    if more:
                        self.down_until[preset.name] = self.clock() + PROVIDER_COOLDOWN
                    return None
                cooldown = ring.failed(key, found == "quota")
                label = preset.key_label(key)
                log.warning(
                    "LLM key %s of %s cools down %.0f s: %s", label, preset.name, cooldown, exc
                )
                continue
            ring.succeeded(key)
            self.down_until.pop(preset.name, None)
            return reply
        return None


def _failed(attempts: list[Attempt], last: LLMError) -> LLMError:
    """The one attempt's own error, or one listing them all."""
    return last if len(attempts) == 1 else every_attempt_failed(attempts, last)
