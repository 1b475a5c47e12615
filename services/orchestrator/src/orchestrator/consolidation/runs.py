"""Memory consolidation: a background turn in session `memory-consolidation` that reads the
session summaries made since the last completed run and makes small, cited edits to memory, as
CONSOLIDATE.md says; on its built-in schedule or on demand, and only when something new happened.

One run at a time across replicas without a lock: a run's turn id is made from what it reads
(the newest summary's time, and how many runs over the same summaries failed before), and a turn
id that exists already queues nothing. Replicas asking at once read the same summaries, so they
name the same turn and one runs.
"""

from __future__ import annotations

import logging
import time
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
from orchestrator.store.summaries import SummaryStore
from orchestrator.store.turns import Turn
from orchestrator.turns.manager import TurnManager

log = logging.getLogger(__name__)

KIND = "consolidation"
# What a consolidation turn may call: memory and schedules, nothing that reaches out or runs.
TOOLS = frozenset(
    {"memory_search", "memory_get", "memory_write", "memory_edit", "schedule_add", "schedule_list"}
)
SUMMARIES_PER_RUN = 20  # the rest go to the next run


class Consolidation:
    """Starts consolidation turns."""

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
        """The consolidation turn: one already queued or running, else a new one over the
        summaries since the last completed run (sessions with news are summarised first);
        None when nothing new happened (no LLM call)."""
        active = await self.turns.active(CONSOLIDATION_SESSION)
        if active:
            return active[0]
        await self.idle.bring_up_to_date()
        since = await self.store.consolidated_until()
        summaries = await self.store.made_after(since, SKIPPED_SESSIONS, SUMMARIES_PER_RUN)
        if not summaries:
            return None
        until = summaries[-1].made_at
        failed = await self.store.failed_runs(until)
        task_id = f"consolidate-{round(until * 1_000_000)}-{failed}"
        message = consolidation_message(
            await self._instructions(),
            summaries,
            await self.workspace.load(SHOWN_FILES),
            self._today(),
            self.file_max_chars,
        )
        await self.store.record_run(task_id, since, until, len(summaries), time.time())
        log.info("memory consolidation %s over %d session summaries", task_id, len(summaries))
        return await self.turns.create(CONSOLIDATION_SESSION, message, KIND, task_id)

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
