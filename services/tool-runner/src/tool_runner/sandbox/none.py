"""The `none` backend: commands run on the host with limits only. Insecure; explicit opt-in."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from tool_runner.sandbox.base import (
    SANDBOX_PATH,
    ChunkSink,
    ExecOutcome,
    ExecSpec,
    Sandbox,
    SandboxUnavailable,
    drop_privileges,
    limit_args,
    sandbox_env,
)
from tool_runner.sandbox.hostbins import list_bins
from tool_runner.sandbox.process import run_process

log = logging.getLogger(__name__)
WARNING = (
    "sandbox 'none': commands run ON THE HOST with the service's filesystem view and "
    "network; only limits and a clean environment apply. Do not use with untrusted input."
)


class NoSandbox(Sandbox):
    """Host execution in the workspace, as the sandbox uid when root, in its own process group."""

    name = "none"
    insecure = True

    def __init__(
        self,
        workspace: Path,
        uid: int | None,
        gid: int | None,
        chunk: tuple[int, float] = (4096, 0.1),
        skill_roots: dict[str, Path] | None = None,
    ):
        super().__init__()
        self.workspace = workspace
        self.workspace_path = str(workspace)
        self.configured_roots = dict(skill_roots or {})
        self.uid, self.gid = uid, gid
        self.chunk = chunk
        self.prlimit = shutil.which("prlimit") or ""
        self.warnings = [WARNING]

    async def start(self) -> None:
        if not self.prlimit:
            raise SandboxUnavailable("prlimit (util-linux) is not installed; limits cannot be set")
        log.warning("!!! %s", WARNING)
        self.available_bins = list_bins(SANDBOX_PATH.split(":"))
        found = self.existing_roots(self.configured_roots)
        await self.offer_readable_roots({name: str(path) for name, path in found.items()})

    async def run(self, spec: ExecSpec, sink: ChunkSink | None = None) -> ExecOutcome:
        env = sandbox_env(spec.env)
        env["HOME"] = str(self.workspace)
        argv = [
            *drop_privileges(self.uid, self.gid),
            self.prlimit,
            *limit_args(spec.limits),
            "--",
            "/bin/sh",
            "-c",
            spec.command,
        ]
        cwd = (self.workspace / spec.workdir).resolve()
        return await run_process(argv, spec.limits, sink, self.chunk, cwd=str(cwd), env=env)
