"""Schedules of turns: create (validated, bounded per session and in all for the model), list,
remove, and the loop every replica runs that fires what is due, each due time once in the cluster.

A firing queues the schedule's message as a `schedule` turn in its session, under a task id
made from the schedule and the due time: replicas that race create one task, and a replica
that stops between queuing and recording the firing queues nothing twice when it (or another)
looks again. Missed firings after downtime: once, late, then the rhythm resumes; a firing while
the schedule's previous turn is still queued or running is skipped and counted (README).

The built-in schedules (schedules/builtins.py) fire through the same rows and the same claim,
but claim first: their action is not keyed by the due time, so it runs on the replica whose
claim won, in a task of its own (a long pruning does not hold the users' firings back).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence

from orchestrator.agent.prompt import HEARTBEAT_TOKEN
from orchestrator.config import Settings
from orchestrator.schedules.builtins import Builtin
from orchestrator.schedules.schedule_rules import (
    ScheduleInvalid,
    Timing,
    first_run,
    iso,
    next_run,
    parse_timing,
)
from orchestrator.store.channels import BadTarget, ChannelStore, chat_target
from orchestrator.store.schedules import ScheduledTurn, ScheduleStore
from orchestrator.store.sessions import InvalidSessionId, check_session_id

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 20_000
CLOSE_GRACE = 5.0  # seconds a closing scheduler lets a firing under way finish
# submit(session id, message, kind, task id, model): queues a turn (a no-op if the id exists)
# asking the schedule's model preset (None: no choice of its own).
Submit = Callable[[str, str, str, str, str | None], Awaitable[object]]


class ScheduleLimit(Exception):
    """The model already has as many schedules as it may (in the session, or in all)."""


class Scheduler:
    """Schedules in the store, and this replica's part in firing them."""

    def __init__(
        self,
        store: ScheduleStore,
        submit: Submit,
        settings: Settings,
        builtins: Sequence[Builtin] = (),
        chats: ChannelStore | None = None,
    ):
        self.store = store
        self.chats = chats  # channel chats a schedule's answers are owed to
        self.submit = submit
        self.settings = settings
        self.builtins = {builtin.name: builtin for builtin in builtins}
        self._running: dict[str, asyncio.Task[None]] = {}  # built-ins' actions under way here
        self._loop: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._broken: set[str] = set()  # due rows that cannot fire, reported once each

    async def add(
        self,
        message: str,
        *,
        session_id: str | None = None,
        at: str | None = None,
        every: float | None = None,
        cron: str | None = None,
        timezone: str | None = None,
        created_in: str | None = None,
        model: str | None = None,
        deliver_to: str | None = None,
    ) -> ScheduledTurn:
        """A new schedule whose turns ask preset `model` (None: the background model) and
        whose answers go to the `deliver_to` chat (`channel:chat_id`; default: the chat it was
        made from, if any; "" none); ScheduleInvalid (bad input), UnknownModel (no such
        preset) or ScheduleLimit (the model's bound)."""
        if model is not None:
            self.settings.presets.named(model)
        if not message.strip():
            raise ScheduleInvalid("`message` is empty")
        if len(message) > MAX_MESSAGE_CHARS:
            raise ScheduleInvalid(f"`message` is over {MAX_MESSAGE_CHARS} characters")
        now = time.time()
        timing = parse_timing(
            at,
            every,
            cron,
            timezone,
            now=now,
            min_every=self.settings.schedule_min_every,
            default_timezone=self.settings.timezone,
        )
        deliver_to = await self._delivery_target(deliver_to, created_in)
        schedule_id = uuid.uuid4().hex[:12]
        target = session_id or f"schedule-{schedule_id}"
        try:
            check_session_id(target)
        except InvalidSessionId as exc:
            raise ScheduleInvalid(str(exc)) from exc
        entry = ScheduledTurn(
            schedule_id,
            target,
            message,
            timing,
            first_run(timing, now),
            created_in,
            now,
            model=model,
            deliver_to=deliver_to,
        )
        refused = await self.store.add(
            entry, self.settings.schedules_per_session, self.settings.schedules_max_model
        )
        if refused is not None:
            raise ScheduleLimit(self._limit_reason(refused))
        log.info("schedule %s added (%s) for session %s", entry.id, timing.kind, target)
        return entry

    async def _delivery_target(self, named: str | None, created_in: str | None) -> str | None:
        if named is not None:
            if not named.strip():
                return None
            try:
                chat_target(named)
            except BadTarget as exc:
                raise ScheduleInvalid(f"`deliver_to`: {exc}") from exc
            return named.strip()
        if self.chats is None or created_in is None:
            return None
        return await self.chats.chat_of(created_in)

    def _limit_reason(self, bound: str) -> str:
        if bound == "session":
            return (
                f"this session already has {self.settings.schedules_per_session} schedules "
                "(CRAYFISH_SCHEDULES_PER_SESSION); remove one first"
            )
        return (
            f"the model's schedules already number {self.settings.schedules_max_model} in all "
            "sessions, the most CRAYFISH_SCHEDULES_MAX_MODEL allows; no schedule was added. "
            "Remove one of this conversation's (schedule_remove), or ask the user to remove "
            "some (crayfish schedules rm ID)"
        )

    async def entries(self, session_id: str | None = None) -> list[ScheduledTurn]:
        """Every schedule, soonest first; with `session_id`, those firing in or made in it."""
        return await self.store.entries(session_id)

    async def remove(self, schedule_id: str, session_id: str | None = None) -> bool:
        """Deletes it; with `session_id`, only one firing in or made in that session."""
        if session_id is not None:
            entry = await self.store.get(schedule_id)
            if entry is None or session_id not in (entry.session_id, entry.created_in):
                return False
        return await self.store.delete(schedule_id)

    async def fire_due(self, stop: asyncio.Event | None = None) -> list[str]:
        """Queues a turn for each due schedule (until `stop` is set); returns the ids of the
        tasks this replica recorded a firing for."""
        now = time.time()
        fired = []
        for entry in await self.store.due(now, list(self.builtins)):
            if stop is not None and stop.is_set():
                break  # closing: the rest fire on the next look, here or on another replica
            if entry.builtin:
                if not self._stopping.is_set():  # closed: left for another replica
                    await self._fire_builtin(entry, now)
                continue
            task_id = f"sched-{entry.id}-{round(entry.next_run * 1000)}"
            try:
                if await self._skipped(entry, now):
                    continue
                message = scheduled_message(entry)
                await self.submit(entry.session_id, message, "schedule", task_id, entry.model)
                if entry.deliver_to and self.chats is not None:  # before the firing is recorded
                    channel, chat_id = chat_target(entry.deliver_to)
                    await self.chats.owe_reply(task_id, channel, chat_id)
                following = next_run(entry.timing, entry.next_run, now)
                if await self.store.advance(entry, following, task_id, now):
                    fired.append(task_id)
                    late = now - entry.next_run
                    log.info("schedule %s fired (%.1f s after its time)", entry.id, late)
            except ScheduleInvalid as exc:  # a row stored before its fields were checked
                if entry.id not in self._broken:
                    self._broken.add(entry.id)
                    log.error("schedule %s cannot fire (remove it): %s", entry.id, exc)
            except Exception:  # one broken schedule must not stop the others
                log.exception("schedule %s could not fire", entry.id)
        return fired

    async def _fire_builtin(self, entry: ScheduledTurn, now: float) -> None:
        """Claims the due time of a built-in schedule and, if this replica's claim won, starts
        its action; not while its previous action is still under way here."""
        builtin = self.builtins[entry.id]
        under_way = self._running.get(builtin.name)
        if under_way is not None and not under_way.done():
            return  # left due: another replica may take it
        following = next_run(Timing("every", every=builtin.every), entry.next_run, now)
        try:
            if not await self.store.advance(entry, following, None, now):
                return  # another replica's claim won
        except Exception:  # the database may be away for a moment: the next look retries
            log.exception("the built-in schedule %s could not fire", builtin.name)
            return
        self._running[builtin.name] = asyncio.create_task(
            _run_builtin(builtin), name=f"builtin-{builtin.name}"
        )

    async def _skipped(self, entry: ScheduledTurn, now: float) -> bool:
        """True (and the skip recorded) when the schedule's previous turn is still queued or
        running: firings of slow turns do not pile up in the session."""
        status = await self.store.previous_busy(entry)
        if status is None:
            return False
        following = next_run(entry.timing, entry.next_run, now)
        if following is not None and await self.store.skip(entry, following):
            log.warning(
                "schedule %s: the firing due %s was skipped, its previous turn %s is still %s",
                entry.id,
                iso(entry.next_run),
                entry.last_task_id,
                status,
            )
        return following is not None

    async def start(self) -> None:
        """Records the built-in schedules (their intervals as this replica's settings say),
        then looks for due schedules until closed."""
        if self._loop is not None:
            return
        now = time.time()
        for builtin in self.builtins.values():
            await self.store.plant(builtin.name, builtin.every, now + builtin.first_after, now)
        self._loop = asyncio.create_task(self._run(), name="schedules")

    async def _run(self) -> None:
        # A built-in shorter than the poll (a test's heartbeat) still fires at its own rhythm.
        wait = min([self.settings.schedule_poll, *(b.every for b in self.builtins.values())])
        while not self._stopping.is_set():
            try:
                await self.fire_due(self._stopping)
            except Exception:  # the database may be away for a moment
                log.exception("looking for due schedules failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), wait)

    async def close(self) -> None:
        """Stops firing. A firing under way is finished first (its turn queued and the firing
        recorded, or neither), for at most CLOSE_GRACE seconds before it is cut."""
        self._stopping.set()
        if self._loop is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._loop), CLOSE_GRACE)
        self._loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._loop
        for action in self._running.values():  # a pruning cut short resumes at its next time
            action.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await action


async def _run_builtin(builtin: Builtin) -> None:
    try:
        await builtin.run()
    except Exception:  # a bad HEARTBEAT.md or a database away must not end the schedule
        log.exception("the built-in schedule %s failed", builtin.name)


def scheduled_message(entry: ScheduledTurn) -> str:
    """The user message of a firing: the schedule's text and the rule for quiet results."""
    return (
        f"[Scheduled task {entry.id}, due {iso(entry.next_run, entry.timing.timezone)}] "
        f"{entry.message}\n\n"
        "(This turn was started by a schedule, not by the user. If nothing needs the user's "
        f"attention, reply exactly {HEARTBEAT_TOKEN}; to alert them, use the notify tool.)"
    )
