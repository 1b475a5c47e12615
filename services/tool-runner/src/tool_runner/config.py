"""Settings of the tool-runner, read once from TOOL_RUNNER_* environment variables."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from crayfish_common.settings import ServiceSettings
from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

DEFAULT_DENY = [
    r"\brm\s+(-[a-zA-Z]*\s+)*-[a-zA-Z]*[rR][a-zA-Z]*\s+(-[a-zA-Z]*\s+)*/(\s|$|\*)",
    r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:",
    r"\bmkfs(\.\w+)?\b",
    r"\b(shutdown|reboot|poweroff|halt)\b",
    r"\bdd\b[^\n]*\bof=/dev/",
]


SKILL_ROOT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


class ToolRunnerSettings(ServiceSettings):
    """Everything the tool-runner can be told; limits are defaults a call may lower."""

    model_config = SettingsConfigDict(
        env_prefix="TOOL_RUNNER_", extra="ignore", populate_by_name=True
    )

    port: int = 50051
    # The assistant's workspace: commands start in it, the file tools reach only it.
    workspace: Path = Path("./workspace")
    # The tool-runner's own state (never in the workspace).
    data_dir: Path = Path("./.crayfish-data/tool-runner")
    # "bwrap" (default), "docker", or "none" (no isolation: only when chosen explicitly).
    sandbox: Literal["bwrap", "docker", "none"] = "bwrap"
    # The uid/gid commands run as when the service runs as root.
    sandbox_uid: int = 65534
    # The gid commands run as when the service runs as root.
    sandbox_gid: int = 65534
    # As root: chown workspace entries to the sandbox uid at start-up so commands can write them.
    chown_workspace: bool = True
    # Skill folders commands may read (and run scripts from), mounted read-only at
    # /skills/<name>: JSON, e.g. {"managed": "/data/skills/managed", "builtin": "/opt/skills"}.
    skill_roots: dict[str, Path] = Field(default_factory=dict)
    # Secrets for commands (secrets.py has the format): only this service reads the file.
    secrets_file: Path | None = Field(default=None, validation_alias="CRAYFISH_SECRETS_FILE")

    # --- Limits (per command; a call may ask for less, never more) ---
    # Seconds a command may run unless its call asks for another timeout.
    default_timeout: float = 60.0
    # The longest timeout a call may ask for, in seconds.
    max_timeout: float = 600.0
    # CPU seconds per command (RLIMIT_CPU).
    cpu_seconds: int = 300
    # Memory per process in MB (RLIMIT_AS; docker: the container's memory).
    memory_mb: int = 1024
    # Processes per command (RLIMIT_NPROC; docker: the pids limit).
    max_processes: int = 256
    # The largest file a command may write, in MB (RLIMIT_FSIZE).
    max_file_mb: int = 256
    # The size of the sandbox's tmpfs /tmp, in MB.
    tmp_size_mb: int = 64
    # Commands running at once, per session and per tool-runner: a call past either waits for
    # a slot (within its timeout), so one reply with 40 exec calls cannot run 40 sandboxes.
    max_running: int = Field(default=8, ge=1)
    # Commands of one session running at once; more wait for a slot.
    max_running_per_session: int = Field(default=4, ge=1)
    # Memory of all running commands together (a parent cgroup over the per-command ones;
    # bwrap as root): past it the kernel kills a command. 0: half of the machine's memory.
    total_memory_mb: int = Field(default=0, ge=0)
    # bwrap: sandboxes started ahead of time, each waiting for one command (0: start each
    # command's sandbox when it arrives). Every command still gets namespaces of its own.
    warm_sandboxes: int = Field(default=2, ge=0, le=16)
    # Bytes kept per stream of a command (head + tail); then the process is killed past this.
    output_limit: int = 40_000
    # A command printing more than this many bytes is killed.
    output_kill_bytes: int = 64 * 1024 * 1024
    # Characters of any tool result shown to the model (head + tail around a marker).
    result_limit: int = 40_000
    # The largest file read_file (and read_spreadsheet) reads, in bytes.
    read_max_bytes: int = 10 * 1024 * 1024
    # The largest content write_file and edit_file write, in bytes.
    write_max_bytes: int = 10 * 1024 * 1024
    # Entries list_dir returns at most.
    list_max_entries: int = 1000

    # Streaming: a chunk is sent when it reaches this size or this age.
    stream_chunk_bytes: int = 4096
    # Seconds after which a chunk of output is sent however small.
    stream_interval: float = 0.1

    # Defence in depth: regexes refused in exec commands; when allowlist is set, only these
    # programs may start a command (first word of each pipeline element).
    deny_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_DENY))
    # When set (a JSON list), only these programs may start a command.
    allowlist: list[str] = Field(default_factory=list)

    # --- Background processes (exec with background/yield_ms; the process tool) ---
    # Background processes one session may have running at once; past it exec says so.
    max_processes_per_session: int = Field(default=8, ge=0)
    # Milliseconds a background exec waits before it answers (an early failure is then seen).
    background_yield_ms: int = Field(default=1000, ge=0, le=120_000)
    # A running process no one polled, wrote to or read for this long is killed (seconds).
    process_idle_seconds: float = Field(default=1800.0, gt=0)
    # A background process is killed this long after its start, whatever it does (seconds).
    process_max_seconds: float = Field(default=14_400.0, gt=0)
    # Bytes of output kept per process (a ring: the oldest are dropped first).
    process_buffer_bytes: int = Field(default=1024 * 1024, ge=4096)

    # --- Docker backend ---
    # The Docker engine's address (e.g. unix:///var/run/docker.sock); empty: DOCKER_HOST's.
    docker_host: str = ""
    # The image of each session's container.
    docker_image: str = "crayfish-sandbox:latest"
    # Seconds after which an idle session's container is removed.
    docker_idle_seconds: float = 900.0
    # The workspace's path as the Docker engine sees it (when the tool-runner itself runs in a
    # container, the host path of the workspace volume); default: the workspace path.
    docker_workspace_source: str = ""

    @field_validator("skill_roots")
    @classmethod
    def _root_names(cls, roots: dict[str, Path]) -> dict[str, Path]:
        for name in roots:
            if not SKILL_ROOT_NAME.fullmatch(name):
                raise ValueError(f"skill root name {name!r}: use a-z, 0-9, '-' or '_'")
        return roots

    @field_validator("secrets_file", mode="before")
    @classmethod
    def _no_file(cls, path: object) -> object:
        # Compose passes an empty value when no file is set: that is no file, not "./".
        return None if path == "" else path

    @property
    def sandboxes_memory_mb(self) -> int:
        """total_memory_mb, or half of this machine's memory when it is 0."""
        if self.total_memory_mb:
            return self.total_memory_mb
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return max(pages // 2 // (1024 * 1024), 1)

    @property
    def is_root(self) -> bool:
        return os.geteuid() == 0
