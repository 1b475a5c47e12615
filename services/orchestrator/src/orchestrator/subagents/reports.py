"""A child's end told to its parent's session: a report turn there, whose message is the child's
result (or why it has none) and whose answer goes to the user under the usual delivery rules
(NO_REPLY stays silent; a notification when no one follows the session). Queued once: by the
replica that sees the child end (the run's own, or the sweep of a dead replica's turns), and
by a slow look on every replica for an end whose report a crash lost."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from orchestrator.notify.notify import Notifier, NotifyLimit
from orchestrator.notify.webhooks import Notification
from orchestrator.store.subagents import KIND, Child, SubagentStore
from orchestrator.store.turns import Turn
from orchestrator.subagents.children import outcome_text

log = logging.getLogger(__name__)

# Seconds between the looks for ended children no report was queued for (a replica that died
# between a child's end and its report); an end seen here is reported at once.
LOOK_EVERY = 5.0
ENDS = frozenset({"task.completed", "task.failed", "task.cancelled", "task.interrupted"})


def report_message(child: Child) -> str:
    """The report turn's message: what the parent's model reads of the child's end."""
    turn = child.turn
    assert turn is not None
    took = (turn.finished_at or 0) - (turn.started_at or turn.created_at)
    named = f" ({child.label!r})" if child.label else ""
    return (
        f"[Subagent report] Subagent {child.child_id}{named} ended after {max(took, 0):.0f} s, "
        f"{outcome_text(turn)}\n\n"
        f"Its task was: {turn.message[:1000]}\n\n"
        "Tell the user what matters from this, or reply NO_REPLY if there is nothing to say."
    )


class Reports:
    """Queues the report turns of this store's ended children, once each."""

    def __init__(self, store: SubagentStore, notifier: Notifier):
        self.store = store
        self.notifier = notifier
        self._ended = asyncio.Event()
        self._looker: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._looker = asyncio.create_task(self._look_loop(), name="subagent-reports")

    async def close(self) -> None:
        if self._looker is not None:
            self._looker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._looker

    def observe(self, type_: str, data: dict[str, Any]) -> None:
        """An event published here (TurnManager's observers): a child's end wakes the look."""
        if type_ in ENDS and data.get("kind") == KIND:
            self._ended.set()

    async def _look_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LOOK_EVERY):
                    await self._ended.wait()
            self._ended.clear()
            try:
                await self.report_due()
            except Exception:  # the database may be away for a moment: the next look
                log.exception("reporting ended subagents failed")

    async def report_due(self) -> list[Turn]:
        reports = await self.store.report_due(report_message)
        for report in reports:
            log.info("subagent report %s queued in session %s", report.id, report.session_id)
        return reports

    async def tell_unwatched(self, turn: Turn, text: str, watched: bool) -> None:
        """A report turn's answer no one follows (no open chat or web page) reaches the user
        as a notification; NO_REPLY (not delivered) does not."""
        if watched or not turn.delivered or not text.strip():
            return
        note = Notification(text[:4000], "A subagent finished", session_id=turn.session_id)
        try:
            await self.notifier.notify(note)
        except NotifyLimit as exc:
            log.warning("subagent report %s not notified: %s", turn.id, exc)
