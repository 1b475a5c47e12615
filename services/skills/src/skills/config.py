"""Settings of the skills service, read from `SKILLS_*` environment variables."""

from __future__ import annotations

from pathlib import Path

from crayfish_common.settings import ServiceSettings
from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"


class SkillsSettings(ServiceSettings):
    """Where skills live, limits, and where commands run (for `bin:` requirements)."""

    model_config = SettingsConfigDict(env_prefix="SKILLS_", extra="ignore")

    port: int = 50053
    # Workspace skills are `<workspace>/skills/*/SKILL.md`.
    workspace: Path = Path("workspace")
    # Installed skills go to `<data_dir>/managed/`.
    data_dir: Path = Path(".crayfish-data/skills")
    # The built-in skills' folder (shipped in the package).
    builtin_dir: Path = BUILTIN_DIR
    # The tool-runner whose sandbox PATH decides `bin:` requirements; the launcher sets
    # TOOL_RUNNER_ADDR for every service, so that name is accepted too.
    tool_runner_addr: str = Field(
        default="",
        validation_alias=AliasChoices("SKILLS_TOOL_RUNNER_ADDR", "TOOL_RUNNER_ADDR"),
    )
    # Seconds the tool-runner's answer (which programs and variables a command has)
    # is used before it is asked again.
    bins_cache_seconds: float = 60.0
    # Seconds before asking again when the tool-runner could not answer.
    bins_retry_seconds: float = 5.0
    # Reload skills when their files change (false: rescan on every request).
    # Hot reload: watchfiles waits `watch_step_ms` of quiet, at most `watch_debounce_ms`.
    watch: bool = True
    # Milliseconds of quiet watchfiles waits for before a reload.
    watch_step_ms: int = 50
    # Milliseconds a reload waits at most while files keep changing.
    watch_debounce_ms: int = 1600
    # Characters of the skills section of the system prompt.
    prompt_max_chars: int = 30_000
    # A larger SKILL.md is not loaded (a diagnostic says why).
    max_skill_file_bytes: int = 256 * 1024
    # Characters of one skill resource a read returns.
    max_resource_chars: int = 100_000
    # The largest skill archive accepted, in bytes.
    max_archive_bytes: int = 20 * 1024 * 1024
    # The largest unpacked skill, in bytes.
    max_install_bytes: int = 50 * 1024 * 1024
    # The largest single file in a skill, in bytes.
    max_install_file_bytes: int = 10 * 1024 * 1024
    # Entries (files and folders) a skill may hold.
    max_install_files: int = 1000

    @property
    def workspace_skills_dir(self) -> Path:
        return self.workspace / "skills"

    @property
    def managed_dir(self) -> Path:
        return self.data_dir / "managed"
