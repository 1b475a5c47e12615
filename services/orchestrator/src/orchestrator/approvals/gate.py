"""The check before each exec of a turn: the workspace's policy judges the command; a command
that needs a person pauses the turn (its question is an event and a row any replica may
answer) until an answer, or the fallback when none comes in time. A refusal is a tool error
the model reads."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

from crayfish_common.tools import ToolResult

from orchestrator.approvals.desk import ApprovalDesk, Question, approval_json
from orchestrator.approvals.policy import ExecPolicy, Verdict, fallback, judge
from orchestrator.approvals.programs import Analysis, analyse, sandbox_workdir
from orchestrator.turns.events import EventSink

log = logging.getLogger(__name__)
# `process` write: what a background process reads may be commands (a shell's stdin), so under a
# policy other than `full` the text is judged like a command line (asked or refused when it is
# no allowlisted program's), never passed by.
GATED_TOOLS = ("exec", "process")
# Turns from outside (a chat channel's): CRAYFISH_APPROVAL_POLICY_OUTSIDE judges their commands.
CHANNEL_KIND = "channel"
OUTSIDE_KINDS = frozenset({CHANNEL_KIND})
# A chat's session (`<channel>.<chat>`, the only sessions a channel's turns may use): every turn
# there or in its sandbox (a subagent a chat's turn spawned, a background process's wake-up, a
# subagent's report) is outside input too, so the outside policy cannot be stepped around.
CHAT_SESSION = re.compile(r"[a-z][a-z0-9_-]*\.[^/]+")


def is_outside(kind: str, session_id: str) -> bool:
    """Whether a turn of this kind, using this session's sandbox, is judged as outside input."""
    return kind in OUTSIDE_KINDS or CHAT_SESSION.fullmatch(session_id) is not None


class ExecGate:
    """One turn's check of its exec calls."""

    def __init__(
        self,
        desk: ApprovalDesk,
        task_id: str,
        session_id: str,
        emit: EventSink,
        outside: bool = False,
    ):
        self.desk = desk
        self.task_id = task_id
        self.session_id = session_id
        self.emit = emit
        self.outside = outside  # a turn from a chat channel: the outside policy

    async def check(self, name: str, raw_arguments: str, call_id: str) -> ToolResult | None:
        """None when the call may run; else the result the model reads instead. When the
        store cannot be read or written, the command does not run (closed, not open)."""
        if name not in GATED_TOOLS:
            return None
        gated = _gated_command(name, _arguments(raw_arguments))
        if gated is None:
            return None  # not a command, or the registry answers with the schema's complaint
        try:
            return await self._check(*gated, call_id)
        except Exception as exc:  # the database away: say so, run nothing
            log.warning("exec approval check failed: %s", exc)
            return _refused(f"the exec policy could not be checked ({exc})")

    async def _check(
        self, command: str, workdir: str, env: dict[str, Any] | None, call_id: str
    ) -> ToolResult | None:
        policy = await self.desk.policy(self.outside)
        if policy.security == "full" and policy.ask != "always":
            return None
        analysis = await asyncio.to_thread(analyse, command, workdir, env=env)
        verdict = judge(policy, analysis)
        if verdict.action == "allow":
            return None
        if verdict.action == "deny":
            return _refused(f"the exec policy refuses this command: {verdict.reason}")
        return await self._ask(policy, analysis, verdict, command, workdir, call_id)

    async def _ask(
        self,
        policy: ExecPolicy,
        analysis: Analysis,
        verdict: Verdict,
        command: str,
        workdir: str,
        call_id: str,
    ) -> ToolResult | None:
        question = Question(
            self.task_id,
            self.session_id,
            call_id,
            command,
            sandbox_workdir(workdir),
            list(verdict.programs),
            list(verdict.missing),
            verdict.reason,
        )
        row = await self.desk.ask(question)
        await self.emit("approval.requested", approval_json(row))
        answered = await self.desk.wait(row.id)
        if answered is None:
            settled = fallback(await self.desk.policy(self.outside), analysis)
            if await self.desk.expire(row.id, f"fallback-{settled.action}"):
                await self.emit(
                    "approval.expired", {"id": row.id, "call_id": call_id, "action": settled.action}
                )
                if settled.action == "allow":
                    return None
                return _refused(
                    f"nobody answered approval {row.id} in time; {settled.reason}", row.id
                )
            answered = await self.desk.wait(row.id)  # an answer won the race
            assert answered is not None
        data = {"id": row.id, "call_id": call_id, "decision": answered.decision}
        await self.emit("approval.answered", data)
        if answered.decision == "deny":
            return _refused(f"a person denied this command (approval {row.id})", row.id)
        return None


def _refused(reason: str, approval_id: str = "") -> ToolResult:
    data: dict[str, Any] = {"approval_id": approval_id} if approval_id else {}
    return ToolResult(False, f"Error: not run: {reason}.", data, error="not approved")


def _arguments(raw: str) -> dict[str, Any] | None:
    try:
        value = json.loads(raw) if raw.strip() else None
    except (ValueError, RecursionError):  # the registry names what is wrong with them
        return None
    return value if isinstance(value, dict) else None


def _gated_command(
    name: str, arguments: dict[str, Any] | None
) -> tuple[str, str, dict[str, Any] | None] | None:
    """(command line, workdir, env) a call would run, or None for a call that runs none."""
    if arguments is None:
        return None
    if name == "exec" and isinstance(arguments.get("command"), str):
        env = arguments.get("env") if isinstance(arguments.get("env"), dict) else None
        return arguments["command"], str(arguments.get("workdir") or ""), env
    if name == "process" and arguments.get("action") == "write":
        data = arguments.get("data")
        return (data, "", None) if isinstance(data, str) and data.strip() else None
    return None
