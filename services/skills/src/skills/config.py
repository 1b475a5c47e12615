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
    builtin_dir: Path = BUILTIN_DIR
    # The tool-runner whose sandbox PATH decides `bin:` requirements; the launcher sets
    # TOOL_RUNNER_ADDR for every service, so that name is accepted too.
    tool_runner_addr: str = Field(
        default="",
        validation_alias=AliasChoices("SKILLS_TOOL_RUNNER_ADDR", "TOOL_RUNNER_ADDR"),
    )
    bins_cache_seconds: float = 60.0
    bins_retry_seconds: float = 5.0
    # Hot reload: watchfiles waits `watch_step_ms` of quiet, at most `watch_debounce_ms`.
    watch: bool = True
    watch_step_ms: int = 50
    watch_debounce_ms: int = 1600
    prompt_max_chars: int = 30_000
    max_skill_file_bytes: int = 256 * 1024
    max_resource_chars: int = 100_000
    max_archive_bytes: int = 20 * 1024 * 1024
    max_install_bytes: int = 50 * 1024 * 1024
    max_install_file_bytes: int = 10 * 1024 * 1024
    max_install_files: int = 1000

    @property
    def workspace_skills_dir(self) -> Path:
        return self.workspace / "skills"

    @property
    def managed_dir(self) -> Path:
        return self.data_dir / "managed"
