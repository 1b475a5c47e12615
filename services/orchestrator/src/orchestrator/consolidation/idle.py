"""Idle summaries: a session quiet for CRAYFISH_IDLE_SUMMARY_MINUTES gets a summary kept with it in
the store, so a restart or a long pause loses nothing; consolidation reads these summaries and
compaction reuses them (agent/compaction.py) instead of asking the model again.

A newer summary is made from the one before and the messages since (while no compaction came in
between), so a long session is not re-read whole each time it goes quiet.
"""

from __future__ import annotations

import logging
import time

from orchestrator.agent.compaction import summarise
from orchestrator.agent.llm import LLMClient
from orchestrator.agent.llm_record import RequestOrigin
from orchestrator.schedules.heartbeat import HEARTBEAT_SESSION
from orchestrator.store.summaries import StoredSummary, SummaryStore

log = logging.getLogger(__name__)

CONSOLIDATION_SESSION = "memory-consolidation"
# Sessions without conversations worth summarising: consolidation's own, the heartbeat's.
SKIPPED_SESSIONS = (CONSOLIDATION_SESSION, HEARTBEAT_SESSION)
SUMMARY_KIND = "summary"  # the kind of their LLM requests (usage reports, background budget)
PER_PASS = 20  # sessions summarised at most per pass; the rest at the next
# Seconds between two looks for idle sessions, at most (the window's half when shorter).
LOOK_EVERY = 300.0


def look_every(idle_seconds: float) -> float:
    """How often the built-in schedule looks for sessions that went idle."""
    return min(LOOK_EVERY, max(idle_seconds / 2, 0.05))


class IdleSummaries:
    """Summarises sessions whose latest records no summary covers yet."""

    def __init__(
        self, store: SummaryStore, llm: LLMClient, idle_seconds: float, context_tokens: int
    ):
        self.store = store
        self.llm = llm
        self.idle_seconds = idle_seconds
        self.context_tokens = context_tokens  # the window of a preset that names none

    async def summarise_idle(self) -> int:
        """The built-in schedule's pass: sessions idle for the window. Returns how many."""
        return await self.bring_up_to_date(time.time() - self.idle_seconds)

    async def bring_up_to_date(self, idle_before: float | None = None, task_id: str = "") -> int:
        """Summarises the sessions last written before `idle_before` (None: now) that no turn
        is using (their requests recorded as turn `task_id`'s); stops at the first failure
        (the LLM away, a budget used up): the next pass tries again. Returns how many
        summaries were stored."""
        before = time.time() if idle_before is None else idle_before
        stored = 0
        for session_id in await self.store.stale(before, SKIPPED_SESSIONS, PER_PASS):
            try:
                stored += await self.summarise(session_id, task_id)
            except Exception as exc:
                log.warning("idle summary of session %s not made: %s", session_id, exc)
                break
        if stored:
            log.info("summarised %d idle session(s)", stored)
        return stored

    async def summarise(self, session_id: str, task_id: str = "") -> bool:
        """Stores a summary of the session as it is now; False when another replica stored
        one at least as new, or the session is gone."""
        found = await self.store.history(session_id)
        if found is None:
            return False
        earlier, new = "", found.messages
        kept = found.summary
        if kept is not None and found.prefix_kept and kept.messages <= len(found.messages):
            earlier, new = kept.summary, found.messages[kept.messages :]
        preset = self.llm.presets.chosen(self.llm.presets.background)
        # The transcript fits half the summarising model's window, at ~4 characters a token.
        window = preset.context_window or self.context_tokens
        origin = RequestOrigin(session_id, task_id, SUMMARY_KIND)
        text = earlier
        if new:
            text = await summarise(
                self.llm, new, {}, origin, preset.name, earlier, max_chars=window * 2
            )
        summary = StoredSummary(session_id, text, found.last_seq, len(found.messages), time.time())
        return await self.store.put(summary)
