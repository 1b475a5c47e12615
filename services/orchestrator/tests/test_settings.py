"""Every environment variable `.env.example` documents for the orchestrator still sets its field."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from orchestrator.config import Settings

ENV_EXAMPLE = Path(__file__).resolve().parents[3] / ".env.example"
# Read by the `crayfish` CLI, the dev launcher, docker compose or another service, not by the
# orchestrator.
READ_BY_OTHERS = {
    "CRAYFISH_URL",
    "CRAYFISH_ORCHESTRATORS",
    "CRAYFISH_TOOL_RUNNERS",
    "CRAYFISH_POSTGRES_PASSWORD",
    "CRAYFISH_SECRETS_FILE",  # the tool-runner's: only it reads the skills' secrets
    # The connectors service's (web_search).
    "CRAYFISH_WEB_SEARCH_PROVIDER",
    "CRAYFISH_WEB_SEARCH_URL",
    "CRAYFISH_WEB_SEARCH_API_KEY",
}
# An empty keys file (mkstemp makes it 0600, as CRAYFISH_MODEL_KEYS_FILE requires).
KEYS_FILE = Path(tempfile.mkstemp(suffix=".env", prefix="crayfish-keys-")[1])
# Documented name -> (field, a value unlike the default).
NAMES: dict[str, tuple[str, object]] = {
    "OPENAI_BASE_URL": ("openai_base_url", "http://llm.test/v1"),
    "OPENAI_API_KEY": ("openai_api_key", "sk-from-env"),
    "CRAYFISH_MODEL": ("model", "env-model"),
    "CRAYFISH_MODELS": (
        "models",
        '[{"name": "fast", "base_url": "http://llm.test/v1", "model": "m"}]',
    ),
    # Each names a preset: alone, the one OPENAI_*/CRAYFISH_MODEL make (named after its model).
    "CRAYFISH_MODEL_DEFAULT": ("model_default", "gpt-4o-mini"),
    "CRAYFISH_MODEL_FALLBACKS": ("model_fallbacks", "gpt-4o-mini"),
    "CRAYFISH_MODEL_BACKGROUND": ("model_background", "gpt-4o-mini"),
    "CRAYFISH_MODEL_KEYS_FILE": ("model_keys_file", KEYS_FILE),
    "CRAYFISH_LLM_TIMEOUT": ("llm_timeout", 7.5),
    "CRAYFISH_LLM_RETRIES": ("llm_retries", 9),
    "CRAYFISH_LLM_RETRY_BASE_DELAY": ("llm_retry_base_delay", 0.25),
    "CRAYFISH_LLM_DEADLINE": ("llm_deadline", 99.0),
    "CRAYFISH_LLM_EMPTY_CONTENT": ("llm_empty_content", "null"),
    "CRAYFISH_CONTEXT_TOKENS": ("context_tokens", 4096),
    "CRAYFISH_LLM_FIRST_TOOL_CHOICE": ("llm_first_tool_choice", "required"),
    "CRAYFISH_LLM_TOOL_MODE": ("llm_tool_mode", "text"),
    "CRAYFISH_API_TOKEN": ("api_token", "token-from-env"),
    "CRAYFISH_HTTP_PORT": ("http_port", 9090),
    "CRAYFISH_HTTP_HOST": ("http_host", "localhost"),
    "CRAYFISH_TRUSTED_HOSTS": ("trusted_hosts", "crayfish.lan,10.0.0.5"),
    "CRAYFISH_HTTP_REUSE_PORT": ("http_reuse_port", True),
    "CRAYFISH_MAX_BODY_BYTES": ("max_body_bytes", 1234),
    "CRAYFISH_MAX_UPLOAD_BYTES": ("max_upload_bytes", 5678),
    "CRAYFISH_RETRY_WINDOW": ("retry_window", 5.0),
    "CRAYFISH_WORKSPACE": ("workspace", Path("/srv/workspace")),
    "CRAYFISH_DATA_DIR": ("data_dir", Path("/srv/data")),
    "CRAYFISH_TRANSCRIPTS_DIR": ("transcripts_dir", Path("/srv/transcripts")),
    "CRAYFISH_DATABASE_URL": ("database_url", "postgresql://crayfish@db.test/crayfish"),
    "CRAYFISH_DATABASE_POOL_SIZE": ("database_pool_size", 7),
    "CRAYFISH_WORKER_CONCURRENCY": ("worker_concurrency", 3),
    "CRAYFISH_WORKER_ALIVE_EVERY": ("worker_alive_every", 0.5),
    "CRAYFISH_WORKER_HEARTBEAT": ("worker_alive_every", 0.5),  # its old name
    "CRAYFISH_WORKER_STALLED_AFTER": ("worker_stalled_after", 4.0),
    "CRAYFISH_EVENTS_RETENTION_HOURS": ("events_retention_hours", 24.0),
    "CRAYFISH_USAGE_RETENTION_DAYS": ("usage_retention_days", 30.0),
    "CRAYFISH_AGENT_NAME": ("agent_name", "shrimp"),
    "CRAYFISH_MAX_ROUNDS": ("max_rounds", 4),
    "CRAYFISH_REPEAT_LIMIT": ("repeat_limit", 5),
    "CRAYFISH_TOOL_RESULT_MAX_CHARS": ("tool_result_max_chars", 777),
    "CRAYFISH_TOOL_TIMEOUT": ("tool_timeout", 12.0),
    "CRAYFISH_RPC_TIMEOUT": ("rpc_timeout", 3.0),
    "CRAYFISH_AUTO_RECALL": ("auto_recall", False),
    "CRAYFISH_AUTO_RECALL_HITS": ("auto_recall_hits", 8),
    "CRAYFISH_AUTO_RECALL_MIN_SCORE": ("auto_recall_min_score", 0.3),
    "CRAYFISH_AUTO_RECALL_SKIP_SMALL_TALK": ("auto_recall_skip_small_talk", False),
    "CRAYFISH_BOOTSTRAP_MAX_CHARS": ("bootstrap_max_chars", 100),
    "CRAYFISH_BOOTSTRAP_TOTAL_MAX_CHARS": ("bootstrap_total_max_chars", 300),
    "CRAYFISH_TIMEZONE": ("timezone", "Europe/Berlin"),
    "CRAYFISH_HEARTBEAT_INTERVAL": ("heartbeat_interval", 60.0),
    "CRAYFISH_SCHEDULE_POLL": ("schedule_poll", 0.25),
    "CRAYFISH_SCHEDULE_MIN_EVERY": ("schedule_min_every", 5.0),
    "CRAYFISH_SCHEDULES_PER_SESSION": ("schedules_per_session", 3),
    "CRAYFISH_SCHEDULES_MAX_MODEL": ("schedules_max_model", 7),
    "CRAYFISH_IDLE_SUMMARY_MINUTES": ("idle_summary_minutes", 5.0),
    "CRAYFISH_CONSOLIDATE_INTERVAL": ("consolidate_interval", 3600.0),
    "CRAYFISH_NOTIFY_WEBHOOKS": (
        "notify_webhooks",
        [{"url": "https://hooks.test/x", "secret": "s", "preset": "slack"}],
    ),
    "CRAYFISH_NOTIFY_ATTEMPTS": ("notify_attempts", 2),
    "CRAYFISH_NOTIFY_BACKOFF": ("notify_backoff", 0.5),
    "CRAYFISH_NOTIFY_TIMEOUT": ("notify_timeout", 3.0),
    "CRAYFISH_NOTIFY_PER_TURN": ("notify_per_turn", 2),
    "CRAYFISH_NOTIFY_PER_HOUR": ("notify_per_hour", 90),
    "CRAYFISH_NOTIFY_COALESCE": ("notify_coalesce", 2.5),
    "CRAYFISH_SUBAGENT_MAX_DEPTH": ("subagent_max_depth", 2),
    "CRAYFISH_SUBAGENTS_PER_PARENT": ("subagents_per_parent", 2),
    "CRAYFISH_SUBAGENTS_RUNNING": ("subagents_running", 1),
    "CRAYFISH_SUBAGENT_TIMEOUT": ("subagent_timeout", 30.0),
    "CRAYFISH_SUBAGENT_TIMEOUT_MAX": ("subagent_timeout_max", 60.0),
    "CRAYFISH_SUBAGENT_WAIT_MAX": ("subagent_wait_max", 5.0),
    "CRAYFISH_SUBAGENT_DENIED_TOOLS": ("subagent_denied_tools", "notify"),
    "CRAYFISH_IMAGE_MAX_BYTES": ("image_max_bytes", 1000),
    "CRAYFISH_IMAGES_PER_MESSAGE": ("images_per_message", 1),
    "CRAYFISH_IMAGES_PER_REQUEST": ("images_per_request", 2),
    "CRAYFISH_MEDIA_MAX_BYTES": ("media_max_bytes", 4096),
    "CRAYFISH_WEB_FETCH_ALLOW": ("web_fetch_allow", "127.0.0.1:8081"),
    "CRAYFISH_LLM_VISION": ("llm_vision", "on"),
    "CRAYFISH_LOG_LEVEL": ("log_level", "DEBUG"),
    "CRAYFISH_LOG_JSON": ("log_json", True),
    "TOOL_RUNNER_ADDR": ("tool_runner_addr", "tools.test:1"),
    "MEMORY_ADDR": ("memory_addr", "memory.test:2"),
    "SKILLS_ADDR": ("skills_addr", "skills.test:3"),
    "CONNECTORS_ADDR": ("connectors_addr", "connectors.test:4"),
    "CRAYFISH_TOOL_SERVICES": ("tool_services", "db=db.test:5,wiki=[::1]:6"),
    "CRAYFISH_TOOL_SEARCH_THRESHOLD": ("tool_search_threshold", 7),
    "CRAYFISH_PROCESS_WAKEUPS": ("process_wakeups", False),
    "CRAYFISH_MODEL_PRICE": ("model_price", {"input": 1.5, "output": 6.0, "cached": None}),
    "CRAYFISH_BACKGROUND_PROMPT": ("background_prompt", "full"),
    "CRAYFISH_BACKGROUND_HISTORY_TURNS": ("background_history_turns", 9),
    "CRAYFISH_APPROVAL_POLICY": ("approval_policy", '{"security": "allowlist"}'),
    "CRAYFISH_APPROVAL_TIMEOUT": ("approval_timeout", 30.0),
    "CRAYFISH_APPROVAL_POLICY_OUTSIDE": ("approval_policy_outside", '{"security": "deny"}'),
    "CRAYFISH_CHANNELS_TOKEN": ("channels_token", "a-channels-token"),
}


def documented_names() -> set[str]:
    """Variables .env.example lists (set or commented out) that the orchestrator reads."""
    listed = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", ENV_EXAMPLE.read_text(), re.M))
    theirs = {name for name in listed if name.startswith("CRAYFISH_")} - READ_BY_OTHERS
    return theirs | (listed & set(NAMES))


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("CRAYFISH_", "OPENAI_")) or name in NAMES:
            monkeypatch.delenv(name)


@pytest.fixture(scope="module", autouse=True)
def _remove_keys_file() -> Iterator[None]:
    yield
    KEYS_FILE.unlink(missing_ok=True)


def test_every_documented_name_has_a_field_and_every_field_a_documented_name() -> None:
    assert documented_names() == set(NAMES)
    assert {field for field, _ in NAMES.values()} == set(Settings.model_fields)


@pytest.mark.parametrize("name", sorted(NAMES))
def test_the_variable_sets_its_field_and_nothing_else(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    field, value = NAMES[name]
    defaults = Settings().model_dump()
    assert defaults[field] != value
    monkeypatch.setenv(name, json.dumps(value) if isinstance(value, list | dict) else str(value))
    assert Settings().model_dump() == {**defaults, field: value}


def test_the_new_name_of_a_renamed_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRAYFISH_WORKER_HEARTBEAT", "0.5")
    monkeypatch.setenv("CRAYFISH_WORKER_ALIVE_EVERY", "1.5")
    assert Settings().worker_alive_every == 1.5


def test_a_prefixed_copy_of_an_unprefixed_name_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRAYFISH_TOOL_RUNNER_ADDR", "wrong:1")
    monkeypatch.setenv("CRAYFISH_OPENAI_API_KEY", "wrong")
    settings = Settings()
    assert (settings.tool_runner_addr, settings.openai_api_key) == ("127.0.0.1:50051", "")
