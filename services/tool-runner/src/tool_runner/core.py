"""The tool-runner's domain façade: workspace, sandbox, policy and tools, built from settings."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

from crayfish_common.safe_files import FileRefused
from crayfish_common.textcap import cap_text
from crayfish_common.tools import CallContext, Tool, ToolResult, ToolSet

from tool_runner.audit import audit
from tool_runner.config import ToolRunnerSettings
from tool_runner.exec_tool import ExecTool, limits_for
from tool_runner.files import EditFile, ListDir, ReadFile, WriteFile
from tool_runner.policy import CommandPolicy
from tool_runner.prepare import prepare_workspace
from tool_runner.processes.records import ProcessRecord
from tool_runner.processes.table import ProcessTable
from tool_runner.processes.tool import ProcessTool
from tool_runner.redact import RedactingSink
from tool_runner.sandbox.base import Sandbox
from tool_runner.secrets_file import SecretsFile
from tool_runner.slots import CommandSlots
from tool_runner.spreadsheet import ReadSpreadsheet
from tool_runner.workspace import Workspace

log = logging.getLogger(__name__)

# Of a capped result, keep as much of the end as of the beginning: errors are often printed last.
RESULT_HEAD_SHARE = 0.5
# Of an ended background process's output, what its notice carries.
END_TAIL_BYTES = 2000


class RunnerTools(ToolSet):
    """The tools, plus what the tool-runner adds to every call: the secrets file re-read if it
    changed, secrets' values redacted (streamed output too), the result cap, the audit line."""

    def __init__(self, tools: list[Tool], result_limit: int, secrets: SecretsFile):
        super().__init__(tools, expected=(FileRefused,))
        self.result_limit = result_limit
        self.secrets = secrets

    async def run(
        self, name: str, arguments_json: str, call: CallContext | None = None
    ) -> ToolResult:
        call = call or CallContext()
        self.secrets.refresh()
        redactor = self.secrets.redactor
        sink = RedactingSink(call.sink, redactor) if call.sink and redactor else None
        result = await super().run(name, arguments_json, replace(call, sink=sink or call.sink))
        if sink is not None:
            await sink.flush()
        if redactor:
            result.output = redactor.text(result.output)
            result.error = redactor.text(result.error)
            result.data = redactor.value(result.data)
        capped = cap_text(result.output, self.result_limit, RESULT_HEAD_SHARE)
        result.output = capped.text
        result.truncated = result.truncated or capped.truncated
        audit(name, arguments_json, call.session_id, call.call_id, result)
        return result


def make_sandbox(settings: ToolRunnerSettings, workspace: Path) -> Sandbox:
    """The configured backend (not yet started); never a weaker one than asked for."""
    uid, gid = (settings.sandbox_uid, settings.sandbox_gid) if settings.is_root else (None, None)
    chunk = (settings.stream_chunk_bytes, settings.stream_interval)
    if settings.sandbox == "bwrap":
        from tool_runner.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox(
            workspace,
            settings.data_dir,
            uid,
            gid,
            settings.tmp_size_mb,
            chunk,
            settings.skill_roots,
            warm=settings.warm_sandboxes,
            warm_limits=limits_for(settings, None),
            total_memory_mb=settings.sandboxes_memory_mb,
        )
    if settings.sandbox == "docker":
        from tool_runner.sandbox.docker import DockerSandbox  # imports the docker SDK

        return DockerSandbox(settings, workspace, chunk)
    from tool_runner.sandbox.none import NoSandbox

    return NoSandbox(workspace, uid, gid, chunk, settings.skill_roots)


class ToolRunnerCore:
    """Runs the assistant's tools in one workspace, commands in the configured sandbox.

    `start()` prepares the workspace and starts the sandbox (SandboxUnavailable when it cannot);
    `close()` releases every session. Tool failures are results, never exceptions.
    """

    def __init__(self, settings: ToolRunnerSettings):
        self.settings = settings
        owner = (settings.sandbox_uid, settings.sandbox_gid) if settings.is_root else None
        self.ws = Workspace(settings.workspace, owner)
        self.sandbox = make_sandbox(settings, self.ws.root)
        self.policy = CommandPolicy(settings.deny_patterns, settings.allowlist)
        self.slots = CommandSlots(settings.max_running, settings.max_running_per_session)
        # The service's own environment, only for the file's ${VAR} references.
        self.secrets = SecretsFile(settings.secrets_file, self.ws.root, os.environ)
        self.processes = ProcessTable(settings, self.sandbox)
        s = settings
        self.tools = RunnerTools(
            [
                ExecTool(
                    self.ws, s, self.policy, self.sandbox, self.slots, self.secrets, self.processes
                ),
                ProcessTool(self.processes, s.output_limit),
                ReadFile(self.ws, s.read_max_bytes),
                WriteFile(self.ws, s.write_max_bytes),
                EditFile(self.ws, s.write_max_bytes),
                ListDir(self.ws, s.list_max_entries),
                ReadSpreadsheet(self.ws, s.read_max_bytes),
            ],
            s.result_limit,
            self.secrets,
        )

    async def start(self) -> None:
        s = self.settings
        self.secrets.load()  # SecretsError: the service must not start
        if self.secrets.secrets:
            log.info("secrets for commands: %s", ", ".join(self.secrets.describe()))
        prepare_workspace(self.ws.root, self.ws.owner, s.chown_workspace)
        s.data_dir.mkdir(parents=True, exist_ok=True)
        await self.sandbox.start()
        self.processes.start()
        log.info("sandbox %s; workspace %s", self.sandbox.name, self.ws.root)

    async def run(
        self, name: str, arguments_json: str, call: CallContext | None = None
    ) -> ToolResult:
        """Runs one tool call; every failure is an ok=False result."""
        return await self.tools.run(name, arguments_json, call)

    async def process_ends(self) -> AsyncIterator[tuple[ProcessRecord, str]]:
        """Ends of background processes that asked for a notice (ProcessTable.watch), each
        with the tail of its output, secrets redacted."""
        async for tracked in self.processes.watch():
            tail = tracked.output.tail(END_TAIL_BYTES).decode(errors="replace")
            redactor = self.secrets.redactor
            yield tracked.record, redactor.text(tail) if redactor else tail

    async def close_session(self, session_id: str) -> None:
        """Kills the session's background processes, then releases what else it holds (the
        docker backend's container); idempotent."""
        await self.processes.close_session(session_id)
        await self.sandbox.close_session(session_id)

    async def close(self) -> None:
        await self.processes.close()
        await self.sandbox.stop()
