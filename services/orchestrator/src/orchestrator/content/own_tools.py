"""Tools the orchestrator runs itself: schedules (add, list, remove), notify, and those given
(spawn and subagents). They reach the
model through the same ToolRegistry as the tools of the gRPC services: this class offers the
calls the registry makes of a service (`name`, `list_tools`, `run_tool`)."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from crayfish_common.tools import CallContext, Tool, ToolError, ToolResult, ToolSet, object_schema

from orchestrator.agent.presets import UnknownModel
from orchestrator.clients.tool_service import OutputSink, ToolSpec
from orchestrator.notify.notify import Notifier, NotifyLimit
from orchestrator.notify.webhooks import PRIORITIES, Notification
from orchestrator.schedules.schedule_rules import ScheduleInvalid, iso
from orchestrator.schedules.scheduler import ScheduleLimit, Scheduler
from orchestrator.store.channels import BadTarget
from orchestrator.store.schedules import ScheduledTurn
from orchestrator.store.subagents import SpawnRefused
from orchestrator.usage.budgets import BudgetExceeded

log = logging.getLogger(__name__)


def describe_schedule(entry: ScheduledTurn) -> dict[str, Any]:
    """A schedule as the API and the tools show it; one that cannot be shown (a row stored
    before its fields were checked) is marked `broken` with the reason, so a listing still
    answers and names its id for removal."""
    try:
        return _described(entry)
    except (ScheduleInvalid, ValueError, OverflowError, OSError, TypeError) as exc:
        log.warning("schedule %s cannot be shown: %s", entry.id, exc)
        return {
            "id": entry.id,
            "session_id": entry.session_id,
            "message": entry.message,
            "cron": entry.timing.cron if isinstance(entry.timing.cron, str) else None,
            "timezone": entry.timing.timezone if isinstance(entry.timing.timezone, str) else None,
            "next_run": None,
            "next_run_ts": entry.next_run if math.isfinite(entry.next_run) else None,
            "runs": entry.runs,
            "skipped": entry.skipped,
            "created_by": "model" if entry.created_in else "api",
            "model": entry.model,
            "broken": f"cannot be kept as stored ({exc}); remove it and add it again",
        }


def _described(entry: ScheduledTurn) -> dict[str, Any]:
    timing = entry.timing
    return {
        "id": entry.id,
        "session_id": entry.session_id,
        "message": entry.message,
        "at": iso(timing.at) if timing.kind == "at" else None,
        "every": timing.every,
        "cron": timing.cron,
        "timezone": timing.timezone,
        "next_run": iso(entry.next_run, timing.timezone),
        "next_run_ts": entry.next_run,
        "last_run": iso(entry.last_run, timing.timezone),
        "runs": entry.runs,
        "skipped": entry.skipped,
        "created_by": "model" if entry.created_in else "api",
        "model": entry.model,
        "deliver_to": entry.deliver_to,
        "broken": None,
    }


class ScheduleAdd(Tool):
    name = "schedule_add"
    description = (
        "Schedule a message to run later as a turn (in this conversation, or its own session "
        "with own_session): once (`at`, ISO-8601 with offset), every N seconds (`every`) or by "
        "a five-field `cron` expression (with `timezone`)."
    )
    parameters = object_schema(
        {
            "message": {"type": "string", "description": "What to do when it fires."},
            "at": {"type": "string", "description": "e.g. 2026-12-01T09:00:00+01:00"},
            "every": {"type": "number", "description": "Seconds between firings."},
            "cron": {"type": "string", "description": "e.g. `0 9 * * 1-5`"},
            "timezone": {"type": "string", "description": "IANA name for cron, e.g. UTC"},
            "model": {
                "type": "string",
                "description": "A model preset for its turns (e.g. a cheaper one); default: "
                "the background model.",
            },
            "own_session": {
                "type": "boolean",
                "description": "Run in a separate session (for frequent checks) instead of "
                "this conversation.",
            },
            "deliver_to": {
                "type": "string",
                "description": "The chat its answers go to, `channel:chat_id`; default: this "
                "conversation's chat, if it is one; empty: none.",
            },
        },
        required=["message"],
    )

    def __init__(self, scheduler: Scheduler):
        self.scheduler = scheduler

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        entry = await self.scheduler.add(
            args["message"],
            session_id=None if args.get("own_session") else call.session_id,
            at=args.get("at"),
            every=args.get("every"),
            cron=args.get("cron"),
            timezone=args.get("timezone"),
            created_in=call.session_id,
            model=args.get("model") or None,
            deliver_to=args.get("deliver_to"),
        )
        shown = describe_schedule(entry)
        return ToolResult(True, f"Scheduled {entry.id}; next run {shown['next_run']}.", shown)


class ScheduleList(Tool):
    name = "schedule_list"
    description = "List the schedules of this conversation with their next run."
    parameters = object_schema({})

    def __init__(self, scheduler: Scheduler):
        self.scheduler = scheduler

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        entries = [describe_schedule(e) for e in await self.scheduler.entries(call.session_id)]
        if not entries:
            return ToolResult(True, "No schedules.", {"schedules": []})
        lines = [_listed(e) for e in entries]
        return ToolResult(True, "\n".join(lines), {"schedules": entries})


def _listed(shown: dict[str, Any]) -> str:
    head = f"- {shown['id']}: {shown['message'][:80]!r}"
    if shown["broken"]:
        return f"{head}, BROKEN: {shown['broken']} (schedule_remove it)"
    rhythm = shown["cron"] or (f"{shown['every']} s" if shown["every"] else "once")
    model = f", model {shown['model']}" if shown["model"] else ""
    return f"{head}, next {shown['next_run']} ({rhythm}{model})"


class ScheduleRemove(Tool):
    name = "schedule_remove"
    description = "Remove one of this conversation's schedules by id."
    parameters = object_schema({"id": {"type": "string"}}, required=["id"])

    def __init__(self, scheduler: Scheduler):
        self.scheduler = scheduler

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        if not await self.scheduler.remove(args["id"], call.session_id):
            raise ToolError(f"no schedule {args['id']!r} in this conversation")
        return ToolResult(True, f"Removed schedule {args['id']}.")


class Notify(Tool):
    name = "notify"
    description = (
        "Alert the user now (their notification feed and configured webhooks); use it for "
        "findings that need attention, not for routine replies."
    )
    parameters = object_schema(
        {
            "text": {"type": "string", "minLength": 1, "maxLength": 4000},
            "title": {"type": "string", "maxLength": 200},
            "priority": {"type": "string", "enum": list(PRIORITIES)},
            "target": {
                "type": "string",
                "description": "A chat to send it to, `channel:chat_id` (e.g. telegram:12345); "
                "default: this conversation's chat, if it is one.",
            },
        },
        required=["text"],
    )

    def __init__(self, notifier: Notifier):
        self.notifier = notifier

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        note = Notification(
            args["text"], args.get("title", ""), args.get("priority", "normal"), call.session_id
        )
        hooks = await self.notifier.notify(note, args.get("target") or None)
        where = f" and queued for {hooks} webhook(s)" if hooks else ""
        return ToolResult(True, f"Notification sent to the user's feed{where}.", {"id": note.id})


class OwnTools:
    """The orchestrator's own tools, offered to the ToolRegistry like a tool service's."""

    name = "orchestrator"

    def __init__(self, scheduler: Scheduler, notifier: Notifier, more: list[Tool] | None = None):
        """`more`: other tools of the orchestrator's (subagents/tools.py)."""
        self.tools = ToolSet(
            [
                ScheduleAdd(scheduler),
                ScheduleList(scheduler),
                ScheduleRemove(scheduler),
                Notify(notifier),
                *(more or []),
            ],
            expected=(
                ScheduleInvalid,
                ScheduleLimit,
                UnknownModel,
                NotifyLimit,
                BadTarget,
                SpawnRefused,
                BudgetExceeded,
            ),
        )

    async def list_tools(self) -> list[ToolSpec]:
        return [ToolSpec(t.name, t.description, t.parameters) for t in self.tools]

    async def run_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        session_id: str,
        call_id: str,
        deadline: float,
        on_output: OutputSink | None = None,
    ) -> ToolResult:
        call = CallContext(session_id=session_id, call_id=call_id)
        return await self.tools.run(name, json.dumps(arguments), call)
