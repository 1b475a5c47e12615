"""Memory consolidation: a background turn in session `memory-consolidation` that reads the
session summaries made since the last completed run and makes small, cited edits to memory, as
CONSOLIDATE.md says; on its built-in schedule or on demand, and only when something new happened.

Starting one is cheap (no LLM call): the turn itself summarises the sessions with news, then
reads the summaries. One run at a time across replicas without a lock: the run's turn id is
the number of runs ended so far plus one, and a turn id that exists already queues nothing, so
replicas asking at once name the same turn and one runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from zoneinfo import ZoneInfo

from orchestrator.consolidation.idle import CONSOLIDATION_SESSION, SKIPPED_SESSIONS, IdleSummaries
from orchestrator.consolidation.instructions import (
    CONSOLIDATE_FILE,
    DEFAULT_INSTRUCTIONS,
    SHOWN_FILES,
    consolidation_message,
)
from orchestrator.content.workspace import WorkspaceFiles
from orchestrator.store.summaries import StoredSummary, SummaryStore
from orchestrator.store.turns import Turn
from orchestrator.turns.events import EventSink
from orchestrator.turns.manager import TurnManager

log = logging.getLogger(__name__)

KIND = "consolidation"
# What a consolidation turn may call: memory and schedules, nothing that reaches out or runs.
TOOLS = frozenset(
    {"memory_search", "memory_get", "memory_write", "memory_edit", "schedule_add", "schedule_list"}
)
SUMMARIES_PER_RUN = 20  # the rest go to the next run
SUMMARIES_MAX_CHARS = 40_000  # of the summaries one run reads together (at least one)
# The turn's message until it runs and reads the summaries (what GET /api/tasks/{id} shows).
QUEUED_MESSAGE = "Memory consolidation: reads the session summaries since the last run."
# run_upkeep(turn, emit, tools): the turn with the minimal prompt, only `tools`, undelivered.
RunUpkeep = Callable[[Turn, EventSink, frozenset[str]], Awaitable[str]]


class Consolidation:
    """Starts consolidation turns and runs them."""

    def __init__(
        self,
        store: SummaryStore,
        idle: IdleSummaries,
        workspace: WorkspaceFiles,
        turns: TurnManager,
        timezone: str,
        file_max_chars: int,
    ):
        self.store = store
        self.idle = idle
        self.workspace = workspace
        self.turns = turns
        self.timezone = timezone
        self.file_max_chars = file_max_chars

    async def trigger(self) -> Turn | None:
        """The consolidation turn: one already queued or running, else a new one; None when
        nothing new happened since the last completed run (no turn, no LLM call)."""
        active = await self.turns.active(CONSOLIDATION_SESSION)
        if active:
            return active[0]
        since = await self.store.consolidated_until()
        if not await self.store.news_since(since, SKIPPED_SESSIONS):
            return None
        task_id = f"consolidate-{await self.store.ended_runs() + 1}"
        await self.store.record_run(task_id, since, time.time())
        return await self.turns.create(CONSOLIDATION_SESSION, QUEUED_MESSAGE, KIND, task_id)

    async def run(self, turn: Turn, emit: EventSink, run_upkeep: RunUpkeep) -> str:
        """The turn: sessions with news summarised, then the model over the summaries since
        the last completed run; none (the news was in a session still busy): no LLM call."""
        await self.idle.bring_up_to_date(task_id=turn.id)
        since = await self.store.consolidated_until()
        found = await self.store.made_after(since, SKIPPED_SESSIONS, SUMMARIES_PER_RUN)
        summaries = within(found, SUMMARIES_MAX_CHARS)
        if not summaries:
            turn.delivered = False
            return ""
        await self.store.read_until(turn.id, summaries[-1].made_at, len(summaries))
        turn.message = consolidation_message(
            await self._instructions(),
            summaries,
            await self.workspace.load(SHOWN_FILES),
            self._today(),
            self.file_max_chars,
        )
        log.info("memory consolidation %s over %d session summaries", turn.id, len(summaries))
        return await run_upkeep(turn, emit, TOOLS)

    async def _instructions(self) -> str:
        """CONSOLIDATE.md, or the built-in default when the workspace has none readable."""
        file = (await self.workspace.load([CONSOLIDATE_FILE]))[0]
        if file.text is not None and file.text.strip():
            return file.text
        if file.marker and not file.marker.startswith("[missing"):
            log.warning("%s not used (%s): the built-in instructions apply", file.name, file.marker)
        return DEFAULT_INSTRUCTIONS

    def _today(self) -> str:
        zone = ZoneInfo(self.timezone) if self.timezone else None
        return datetime.now(zone).date().isoformat()


def within(summaries: list[StoredSummary], max_chars: int) -> list[StoredSummary]:
    """The first summaries whose texts together stay within `max_chars` (the first always)."""
    kept: list[StoredSummary] = []
    total = 0
    for summary in summaries:
        total += len(summary.summary)
        if kept and total > max_chars:
            break
        kept.append(summary)
    return kept
