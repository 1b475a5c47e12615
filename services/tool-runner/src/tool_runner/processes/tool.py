"""The process tool (list, poll, log, write, kill) and exec's start of a background process."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from crayfish_common.tools import CallContext, Tool, ToolError, ToolResult, object_schema

from tool_runner.processes.table import ProcessRefused, ProcessTable, Tracked
from tool_runner.sandbox.base import ExecSpec, NoBackground

# Bytes of output a `running` answer of exec shows.
TAIL_BYTES = 2000
ACTIONS = ["list", "poll", "log", "write", "kill"]


def describe_record(tracked: Tracked) -> dict[str, Any]:
    r = tracked.record
    ended = r.ended if r.ended is not None else time.time()
    return {
        "process_id": r.id,
        "status": r.status,
        "exit_code": r.exit_code,
        "reason": r.reason,
        "command": r.command,
        "seconds": round(ended - r.started, 1),
        "output_bytes": tracked.output.end,
    }


def _status_line(tracked: Tracked) -> str:
    d = describe_record(tracked)
    line = f"process {d['process_id']}: {d['status']}"
    if d["exit_code"] is not None and d["status"] != "lost":
        line += f", exit code {d['exit_code']}"
    return line + (f" ({d['reason']})" if d["reason"] else "") + f", {d['seconds']:g}s"


async def start_background(
    table: ProcessTable, spec: ExecSpec, wait_ms: int, notify: bool
) -> ToolResult:
    """exec's answer for a background start: the end (if it came within wait_ms) or the id."""
    try:
        tracked = await table.launch(spec, notify)
    except (ProcessRefused, NoBackground) as exc:
        raise ToolError(str(exc)) from None
    table.get(spec.session_id, tracked.record.id)
    try:
        await asyncio.wait_for(asyncio.shield(tracked.done.wait()), wait_ms / 1000)
    except TimeoutError:
        pass
    tail = tracked.output.tail(TAIL_BYTES).decode(errors="replace")
    tracked.polled = tracked.output.end  # the tail shown counts as read
    data = {**describe_record(tracked), "output_tail": tail}
    text = _status_line(tracked)
    if tracked.running:
        text += " — keeps running; follow it with the process tool (poll, log, write, kill)"
    return ToolResult(ok=True, output=f"{text}\noutput tail:\n{tail or '(none yet)'}", data=data)


class ProcessTool(Tool):
    """process: the session's background processes (started by exec with background/yield_ms)."""

    name = "process"
    description = (
        "Follow the background processes exec started in this session: list them, poll (new "
        "output since the last poll and the exit status), log (lines of the kept output), "
        "write (to stdin; eof closes it), kill (the whole process tree)."
    )
    parameters = object_schema(
        {
            "action": {"type": "string", "enum": ACTIONS},
            "process_id": {"type": "string", "maxLength": 64, "description": "For all but list."},
            "data": {"type": "string", "description": "write: text for stdin."},
            "eof": {"type": "boolean", "description": "write: close stdin afterwards."},
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "log: first line (1-based) of the kept output; default: the last "
                "`limit` lines.",
            },
            "limit": {"type": "integer", "minimum": 1, "maximum": 2000},
        },
        required=["action"],
    )

    def __init__(self, table: ProcessTable, poll_limit: int):
        self.table = table
        self.poll_limit = poll_limit

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        action = args["action"]
        if action == "list":
            return self._list(call.session_id)
        if not args.get("process_id"):
            raise ToolError(f"{action}: process_id is required")
        try:
            tracked = self.table.get(call.session_id, args["process_id"])
            if action == "poll":
                return self._poll(tracked)
            if action == "log":
                return self._log(tracked, args.get("offset"), args.get("limit", 200))
            if action == "write":
                await self.table.write(tracked, args.get("data", ""), args.get("eof", False))
                return ToolResult(ok=True, output=f"written to {tracked.record.id}", data={})
            await self.table.kill(tracked)
            return ToolResult(ok=True, output=_status_line(tracked), data=describe_record(tracked))
        except ProcessRefused as exc:
            raise ToolError(str(exc)) from None

    def _list(self, session_id: str) -> ToolResult:
        procs = sorted(self.table.of_session(session_id), key=lambda t: t.record.started)
        lines = [f"{_status_line(t)}: {t.record.command[:200]}" for t in procs]
        return ToolResult(
            ok=True,
            output="\n".join(lines) or "no background processes in this session",
            data={"processes": [describe_record(t) for t in procs]},
        )

    def _poll(self, tracked: Tracked) -> ToolResult:
        data, start = tracked.output.read(tracked.polled, self.poll_limit)
        dropped = start - tracked.polled
        tracked.polled = start + len(data)
        more = tracked.output.end - tracked.polled
        text = data.decode(errors="replace")
        lines = [_status_line(tracked)]
        if dropped:
            lines.append(f"[{dropped} bytes of output were dropped from the buffer unread]")
        lines.append("new output:\n" + text if text else "new output: (none)")
        if more:
            lines.append(f"[{more} more bytes wait: poll again]")
        return ToolResult(
            ok=True,
            output="\n".join(lines),
            data={**describe_record(tracked), "output": text, "dropped_bytes": dropped},
        )

    def _log(self, tracked: Tracked, offset: int | None, limit: int) -> ToolResult:
        kept, _ = tracked.output.read(0, tracked.output.capacity)
        lines = kept.decode(errors="replace").splitlines()
        first = offset - 1 if offset else max(len(lines) - limit, 0)
        shown = lines[first : first + limit]
        head = f"{_status_line(tracked)}; lines {first + 1}-{first + len(shown)} of {len(lines)}"
        if tracked.output.start:
            head += f" (the first {tracked.output.start} bytes were dropped)"
        return ToolResult(
            ok=True,
            output=head + "\n" + "\n".join(shown),
            data={**describe_record(tracked), "lines": shown, "total_lines": len(lines)},
        )
