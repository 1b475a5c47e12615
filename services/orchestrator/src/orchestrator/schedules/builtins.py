"""The orchestrator's own schedules, fired by the one scheduler with the users' ones (each due
time once across replicas): the heartbeat turn, the pruning of old events, requests and usage
records, the summaries of idle sessions and memory consolidation.

They are rows of `scheduled_turns` marked `builtin` that the REST API and the model's tools
neither list nor count: their timing comes from settings (CRAYFISH_HEARTBEAT_INTERVAL,
CRAYFISH_EVENTS_RETENTION_HOURS, CRAYFISH_USAGE_RETENTION_DAYS, CRAYFISH_IDLE_SUMMARY_MINUTES,
CRAYFISH_CONSOLIDATE_INTERVAL), so there is nothing a user
could change or remove there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from orchestrator.config import Settings
from orchestrator.consolidation.idle import look_every
from orchestrator.store.events import EventStore
from orchestrator.store.model_choices import ModelChoices
from orchestrator.store.turn_requests import KEPT_FOR as REQUESTS_KEPT_FOR
from orchestrator.store.turn_requests import TurnRequests
from orchestrator.store.usage import UsageStore

log = logging.getLogger(__name__)

HEARTBEAT = "heartbeat"
RETENTION = "events-retention"
RETENTION_EVERY = 3600.0  # seconds between two prunings of old events (by any replica)
IDLE_SUMMARIES = "idle-summaries"
CONSOLIDATE = "consolidate"


@dataclass(frozen=True)
class Builtin:
    """A built-in schedule: `run` every `every` seconds, first `first_after` seconds after a
    replica starts (or when the last due time passed while none ran)."""

    name: str
    every: float
    first_after: float
    run: Callable[[], Awaitable[object]]


def builtins(
    settings: Settings,
    heartbeat: Callable[[], Awaitable[object]],
    events: EventStore,
    requests: TurnRequests,
    usage: UsageStore,
    choices: ModelChoices,
    summarise_idle: Callable[[], Awaitable[object]] | None = None,
    consolidate: Callable[[], Awaitable[object]] | None = None,
) -> list[Builtin]:
    """The built-in schedules this replica's settings turn on."""
    found = []
    if settings.heartbeat_interval > 0:
        every = settings.heartbeat_interval
        found.append(Builtin(HEARTBEAT, every, every, heartbeat))
    keep = settings.events_retention_hours * 3600
    keep_usage = settings.usage_retention_days * 86400

    async def prune() -> None:
        if keep > 0:
            await prune_old(events, requests, keep)
        if keep_usage > 0:
            await prune_usage(usage, choices, keep_usage)

    if keep > 0 or keep_usage > 0:
        found.append(Builtin(RETENTION, RETENTION_EVERY, 0.0, prune))
    idle = settings.idle_summary_minutes * 60
    if idle > 0 and summarise_idle is not None:
        found.append(Builtin(IDLE_SUMMARIES, look_every(idle), look_every(idle), summarise_idle))
    every = settings.consolidate_interval
    if every > 0 and consolidate is not None:
        found.append(Builtin(CONSOLIDATE, every, every, consolidate))
    return found


async def prune_old(events: EventStore, requests: TurnRequests, keep: float) -> None:
    """Deletes the events of tasks that ended over `keep` seconds ago (each keeps its terminal
    one) and the requests past the time a client may repeat them."""
    removed = await events.prune(time.time() - keep)
    if removed:
        log.info("pruned %d events of tasks older than the retention", removed)
    await requests.prune(time.time() - REQUESTS_KEPT_FOR)


async def prune_usage(usage: UsageStore, choices: ModelChoices, keep: float) -> None:
    """Deletes the records of LLM requests and the turns' choices of model older than `keep`
    seconds."""
    removed = await usage.prune(time.time() - keep)
    if removed:
        log.info("pruned %d records of LLM requests older than the retention", removed)
    await choices.prune(time.time() - keep)
