"""Settings from DB_QUERY_* environment variables, read once at start."""

from __future__ import annotations

from pathlib import Path

from crayfish_common.settings import ServiceSettings
from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict


class DbQuerySettings(ServiceSettings):
    """DB_QUERY_DATABASE is required; the rest have defaults."""

    model_config = SettingsConfigDict(env_prefix="DB_QUERY_", extra="ignore")

    port: int = 50060
    # The SQLite file to read; it is opened read-only, never created.
    database: Path
    # Rows a query returns at most (the rest are cut, and the answer says so).
    max_rows: int = Field(200, ge=1)
    # Seconds a query may run (fetching included) before it is stopped.
    timeout: float = Field(5.0, gt=0)
    # Characters of one text value, and of the whole answer, kept.
    max_cell_chars: int = Field(2_000, ge=10)
    max_output_chars: int = Field(20_000, ge=100)

    @field_validator("database")
    @classmethod
    def _existing_file(cls, value: Path) -> Path:
        if not value.is_file():
            raise ValueError(f"DB_QUERY_DATABASE: no SQLite file at {value}")
        return value.resolve()
