"""Settings from BROWSER_* environment variables, read once at start."""

from __future__ import annotations

from pathlib import Path

from crayfish_common.settings import ServiceSettings
from crayfish_common.url_guard import AllowList
from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import SettingsConfigDict


class BrowserSettings(ServiceSettings):
    """Every setting has a default; the allow-list is shared with web_fetch."""

    model_config = SettingsConfigDict(env_prefix="BROWSER_", extra="ignore", populate_by_name=True)

    port: int = 50056
    # Debian's chromium, driven by Playwright (no browser download at run time).
    chromium: str = "/usr/bin/chromium"
    # Chromium's own sandbox (user namespaces); off only where the container cannot give them.
    chromium_sandbox: bool = True
    # The workspace: downloads land in its inbox/ folder.
    workspace: Path = Path("workspace")
    # host:port entries the pages may reach although not public (as web_fetch's allow-list).
    web_fetch_allow: str = Field(
        "",
        validation_alias=AliasChoices("BROWSER_WEB_FETCH_ALLOW", "CRAYFISH_WEB_FETCH_ALLOW"),
    )
    # Browser contexts (one per session) open at once; a new session past it is refused.
    max_contexts: int = Field(4, ge=1)
    # Pages (tabs and pop-ups) per context; pop-ups past it are closed.
    max_pages: int = Field(3, ge=1)
    # Seconds a session's context may sit unused before it is closed.
    idle_seconds: float = Field(300.0, gt=0)
    # Resident memory of all Chromium processes (MiB); past it the least recently used
    # contexts are closed.
    max_memory_mb: int = Field(1536, ge=64)
    # Characters of a page snapshot returned to the model.
    max_snapshot_chars: int = Field(20_000, ge=500)
    # Bytes of one download kept in the workspace's inbox/.
    max_download_bytes: int = Field(25 * 1024 * 1024, ge=1024)
    # Seconds for a navigation or an action (click, typing) to finish.
    timeout: float = Field(20.0, gt=0)

    @field_validator("web_fetch_allow")
    @classmethod
    def _check_allow(cls, value: str) -> str:
        AllowList.parse(value)  # a bad entry stops start-up with its reason
        return value

    @property
    def allow(self) -> AllowList:
        return AllowList.parse(self.web_fetch_allow)
