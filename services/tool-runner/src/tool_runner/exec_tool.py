"""The exec tool: validate, apply policy and limits, run in the sandbox, describe the outcome."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from crayfish_common.tools import CallContext, Tool, ToolError, ToolResult, object_schema

from tool_runner.config import ToolRunnerSettings
from tool_runner.policy import CommandPolicy
from tool_runner.processes.table import ProcessTable
from tool_runner.processes.tool import start_background
from tool_runner.sandbox.base import ExecOutcome, ExecSpec, Limits, Sandbox
from tool_runner.secrets_file import SecretsFile
from tool_runner.slots import CommandSlots, NoSlot
from tool_runner.workspace import Workspace

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED_ENV = {"PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT"}
# Linux's limit on one argv string (MAX_ARG_STRLEN, with its NUL): `sh -c <command>` fails
# with E2BIG above it.
MAX_COMMAND_BYTES = 131_071
LIMIT_NAMES = ["cpu_seconds", "memory_mb", "max_processes", "max_file_mb", "output_limit"]


class ExecTool(Tool):
    """exec: a shell command in the sandbox, within the policy and the (lowered) limits."""

    name = "exec"
    description = (
        "Run a shell command in the sandboxed workspace (no network); returns exit "
        "code, stdout and stderr. With background (or yield_ms) a command still running "
        "after yield_ms returns a process_id and keeps running: follow it with the process tool."
    )
    parameters = object_schema(
        {
            "command": {"type": "string", "minLength": 1, "description": "sh -c command line."},
            "workdir": {"type": "string", "description": "Folder relative to the workspace."},
            "timeout": {
                "type": "number",
                "minimum": 0.1,
                "description": "Seconds (not for background: an idle timeout and a maximum "
                "lifetime apply instead).",
            },
            "env": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Extra environment variables.",
            },
            "skill": {
                "type": "string",
                "maxLength": 64,
                "description": "The skill whose instructions this command follows: it then gets "
                "the secrets bound to that skill (read_skill says which).",
            },
            "background": {
                "type": "boolean",
                "description": "Keep the command running after this call (a dev server, a long "
                "build); it answers after yield_ms with a process_id unless it ended by then.",
            },
            "yield_ms": {
                "type": "integer",
                "minimum": 0,
                "maximum": 120000,
                "description": "Wait this long for the command, then leave it running in the "
                "background if it has not ended (implies background).",
            },
            "notify_on_exit": {
                "type": "boolean",
                "description": "Background: when the process ends, wake this session with a "
                "turn that reports it.",
            },
            "limits": {
                "type": "object",
                "description": "Optional lower limits for this call.",
                "properties": {k: {"type": "integer", "minimum": 1} for k in LIMIT_NAMES},
                "additionalProperties": False,
            },
        },
        required=["command"],
    )

    def __init__(
        self,
        ws: Workspace,
        settings: ToolRunnerSettings,
        policy: CommandPolicy,
        sandbox: Sandbox,
        slots: CommandSlots,
        secrets: SecretsFile,
        processes: ProcessTable,
    ) -> None:
        self.ws = ws
        self.settings = settings
        self.policy = policy
        self.sandbox = sandbox
        self.slots = slots
        self.secrets = secrets
        self.processes = processes

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        spec = build_spec(self.ws, self.settings, self.policy, args, call.session_id)
        for name in spec.env:
            if name in self.secrets.names:
                raise ToolError(f"env: {name!r} comes from the secrets file; it may not be set")
        # Secrets last: nothing a call passes replaces them.
        spec.env.update(self.secrets.env_for(args.get("skill", "")))
        if args.get("background") or "yield_ms" in args:
            wait = args.get("yield_ms", self.settings.background_yield_ms)
            return await start_background(
                self.processes, spec, wait, args.get("notify_on_exit", False)
            )
        try:
            async with self.slots.slot(spec.session_id, spec.limits.timeout) as left:
                # The wait counts against the call's timeout; the result names the whole.
                running = replace(spec, limits=replace(spec.limits, timeout=left))
                outcome = await self.sandbox.run(running, call.sink)
        except NoSlot as exc:
            raise ToolError(str(exc)) from None
        redactor = self.secrets.redactor
        for stream in (outcome.stdout, outcome.stderr):
            if stream.truncated and redactor:
                redactor.cut_pieces(stream.head, stream.tail)
        return describe(outcome, spec.limits)


def limits_for(
    settings: ToolRunnerSettings, timeout: float | None, asked: dict[str, int] | None = None
) -> Limits:
    """The configured limits, lowered (never raised) by what a call asks for."""
    asked = asked or {}
    wanted = settings.default_timeout if timeout is None else float(timeout)

    def lower(name: str, configured: int) -> int:
        return min(int(asked.get(name, configured)), configured)

    return Limits(
        timeout=min(max(wanted, 0.1), settings.max_timeout),
        cpu_seconds=lower("cpu_seconds", settings.cpu_seconds),
        memory_mb=lower("memory_mb", settings.memory_mb),
        max_processes=lower("max_processes", settings.max_processes),
        max_file_mb=lower("max_file_mb", settings.max_file_mb),
        output_limit=lower("output_limit", settings.output_limit),
        output_kill_bytes=settings.output_kill_bytes,
    )


def build_spec(
    ws: Workspace,
    settings: ToolRunnerSettings,
    policy: CommandPolicy,
    args: dict[str, Any],
    session_id: str,
) -> ExecSpec:
    """An ExecSpec from validated arguments, or a ToolError saying what is refused."""
    command = args["command"]
    size = len(command.encode("utf-8", errors="surrogatepass"))
    if size > MAX_COMMAND_BYTES:
        raise ToolError(
            f"the command is {size} bytes; a command line holds at most {MAX_COMMAND_BYTES}: "
            "write the long part to a file with write_file and run that"
        )
    refusal = policy.check(command)
    if refusal:
        raise ToolError(f"refused by policy: {refusal}")
    workdir = ws.relative(args.get("workdir", "."))
    if not ws.is_dir(workdir):
        raise ToolError(f"workdir {args.get('workdir')}: not a directory")
    env = args.get("env", {})
    for name in env:
        if not _ENV_NAME.match(name) or name in _RESERVED_ENV:
            raise ToolError(f"env: {name!r} may not be set")
        if "\0" in env[name]:
            raise ToolError(f"env: {name!r} holds a NUL character, which no environment can")
    return ExecSpec(
        command=command,
        workdir=workdir,
        env=dict(env),
        limits=limits_for(settings, args.get("timeout"), args.get("limits")),
        session_id=session_id,
    )


def describe(outcome: ExecOutcome, limits: Limits) -> ToolResult:
    """The text the model reads: exit code, stdout, stderr, and any kill or cut."""
    lines = [f"exit code: {outcome.exit_code}"]
    if outcome.killed == "timeout":
        lines.append(f"[timed out after {limits.timeout:g}s; the whole process tree was killed]")
    elif outcome.killed == "output limit":
        lines.append(f"[killed: output passed {limits.output_kill_bytes} bytes]")
    elif outcome.exit_code > 128:
        lines.append(f"[terminated by signal {outcome.exit_code - 128} (a limit may have hit)]")
    stdout, stderr = outcome.stdout.text(), outcome.stderr.text()
    lines.append("stdout:\n" + stdout if stdout else "stdout: (empty)")
    if stderr:
        lines.append("stderr:\n" + stderr)
    if outcome.truncated:
        lines.append(
            f"[output truncated: stdout {outcome.stdout.total} bytes, stderr "
            f"{outcome.stderr.total} bytes; kept the head and tail of each]"
        )
    data = {
        "exit_code": outcome.exit_code,
        "stdout": stdout,
        "stderr": stderr,
        "timed_out": outcome.timed_out,
        "killed": outcome.killed,
        "stdout_bytes": outcome.stdout.total,
        "stderr_bytes": outcome.stderr.total,
        "stdout_truncated": outcome.stdout.truncated,
        "stderr_truncated": outcome.stderr.truncated,
    }
    return ToolResult(
        ok=True,
        output="\n".join(lines),
        data=data,
        exit_code=outcome.exit_code,
        duration_ms=outcome.duration_ms,
        truncated=outcome.truncated,
    )
