"""The model's subagent tools, `spawn` and `subagents`: the schemas it sees, and their calls
handed to the Subagents façade with the calling turn."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crayfish_common.tools import CallContext, Tool, ToolError, ToolResult, object_schema

from orchestrator.store.turns import Turn
from orchestrator.subagents.calling import calling_turn

if TYPE_CHECKING:
    from orchestrator.subagents.children import Subagents

SPAWN = "spawn"
SUBAGENTS = "subagents"
ACTIONS = ("list", "wait", "cancel", "steer")


def _caller() -> Turn:
    turn = calling_turn.get()
    if turn is None:  # a tool call outside a turn's run (none today): refused, not guessed
        raise ToolError("subagents can only be used from a turn")
    return turn


class Spawn(Tool):
    name = SPAWN
    description = (
        "Start a subagent: a separate agent that works on one task with your workspace and "
        "sandbox (not this conversation: give it everything it needs in `task`). It returns "
        "the subagent's id at once; when the subagent ends, its result (or failure) arrives in "
        "this conversation as a message and you answer then. With wait=true you get the result "
        "here instead, if it ends within the wait limit. Use it for long or parallel work."
    )

    parameters = object_schema(
        {
            "task": {
                "type": "string",
                "minLength": 1,
                "maxLength": 20_000,
                "description": "What the subagent should do and report, self-contained.",
            },
            "label": {
                "type": "string",
                "maxLength": 80,
                "description": "A short name for listings, e.g. 'flight prices'.",
            },
            "model": {
                "type": "string",
                "description": "A model preset for it; default: the background preset.",
            },
            "wait": {
                "type": "boolean",
                "description": "Wait here for its result (for a bounded time; if it is still "
                "running then, its result comes as a message). Default false.",
            },
            "timeout_s": {
                "type": "number",
                "minimum": 1,
                "description": "Seconds it may run (default: the configured limit, 300 "
                "unless changed); then it ends as failed.",
            },
        },
        required=["task"],
    )

    def __init__(self, subagents: Subagents):
        self.subagents = subagents

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        return await self.subagents.spawn(
            _caller(),
            args["task"],
            label=args.get("label", ""),
            model=args.get("model", ""),
            wait=bool(args.get("wait", False)),
            timeout_s=args.get("timeout_s"),
        )


class SubagentsTool(Tool):
    name = SUBAGENTS
    description = (
        "Manage the subagents spawned from this conversation: `list` them with their status, "
        "`wait` for some to end (bounded; returns their results), `cancel` some, or `steer` "
        "one or more by sending them `message` (read before their next step). Results arrive "
        "by themselves as messages: do not poll with list."
    )
    parameters = object_schema(
        {
            "action": {"type": "string", "enum": list(ACTIONS)},
            "ids": {
                "type": "array",
                "items": {"type": "string"},
                "maxItems": 20,
                "description": "The subagents to act on (list: default all).",
            },
            "message": {
                "type": "string",
                "minLength": 1,
                "maxLength": 4000,
                "description": "For steer: what to tell them.",
            },
        },
        required=["action"],
    )

    def __init__(self, subagents: Subagents):
        self.subagents = subagents

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        turn, action, ids = _caller(), args["action"], list(args.get("ids") or [])
        if action == "list":
            return await self.subagents.listing(turn, ids)
        if not ids:
            raise ToolError(f"`{action}` needs `ids` (see action list)")
        if action == "wait":
            return await self.subagents.wait(turn, ids)
        if action == "cancel":
            return await self.subagents.cancel(turn, ids)
        if not args.get("message"):
            raise ToolError("`steer` needs `message`")
        return await self.subagents.steer(turn, ids, args["message"])
