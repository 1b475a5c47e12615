"""A bad setting stops each service at start-up with one line naming the variable and what was
expected (no traceback); CRAYFISH_NOTIFY_WEBHOOKS also takes a plain URL or a list of them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# (module, variable, bad value, what the line must say beside the variable)
BAD = [
    ("orchestrator", "CRAYFISH_NOTIFY_WEBHOOKS", "ftp://hooks.example", "http:// or https:// URL"),
    ("orchestrator", "CRAYFISH_HTTP_PORT", "eighty", "expected a valid integer"),
    ("orchestrator", "CRAYFISH_MODEL_PRICE", "2.5/10", "expected JSON like"),
    ("orchestrator", "CRAYFISH_MODEL_PRICE", '{"input": 2.5}', "output"),
    ("orchestrator", "CRAYFISH_BACKGROUND_PROMPT", "tiny", "minimal"),
    ("orchestrator", "CRAYFISH_TIMEZONE", "Mars/Olympus", "not a known IANA time zone"),
    ("orchestrator", "CRAYFISH_APPROVAL_POLICY", '{"ask": "sometimes"}', "ask: must be one of"),
    ("orchestrator", "CRAYFISH_APPROVAL_POLICY", "{allowlist", "not JSON"),
    ("orchestrator", "CRAYFISH_MODELS", "[{", "expected a JSON list of presets"),
    ("orchestrator", "CRAYFISH_MODELS", '[{"name": "a", "model": "m"}]', "[0] base_url: Field"),
    ("orchestrator", "CRAYFISH_MODELS", "@/nonexistent/models.json", "cannot read the file"),
    (
        "orchestrator",
        "CRAYFISH_MODELS",
        '[{"name": "a", "base_url": "http://x", "model": "m", "api_key_env": "NO_SUCH_KEY"}]',
        "NO_SUCH_KEY, which is unset",
    ),
    ("orchestrator", "CRAYFISH_MODEL_FALLBACKS", "nope", "no preset named 'nope'"),
    ("tool_runner", "TOOL_RUNNER_SKILL_ROOTS", "/skills", "expected JSON"),
    ("tool_runner", "TOOL_RUNNER_PORT", "x", "expected a valid integer"),
    ("memory", "MEMORY_PORT", "x", "expected a valid integer"),
    ("skills", "SKILLS_PORT", "x", "expected a valid integer"),
    ("connectors", "CONNECTORS_PORT", "x", "expected a valid integer"),
]


def start(module: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CRAYFISH_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-m", module],
        env={**clean, "CRAYFISH_DATABASE_URL": "postgresql://nobody@/none", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(("module", "variable", "value", "expected"), BAD)
def test_a_bad_setting_stops_the_service_with_one_line_naming_it(
    module: str, variable: str, value: str, expected: str
):
    done = start(module, {variable: value})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr
    assert variable in lines[0] and expected in lines[0], lines[0]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("value", "urls"),
    [
        ("https://ntfy.example/crayfish", ["https://ntfy.example/crayfish"]),
        ("http://a.example/x, https://b.example/y", ["http://a.example/x", "https://b.example/y"]),
        ('[{"url": "https://c.example", "preset": "ntfy"}]', ["https://c.example"]),
    ],
)
def test_notify_webhooks_take_a_url_a_list_or_json(
    value: str, urls: list[str], monkeypatch: pytest.MonkeyPatch
):
    from crayfish_common.settings_errors import read_settings
    from orchestrator.config import Settings

    monkeypatch.setenv("CRAYFISH_NOTIFY_WEBHOOKS", value)
    assert [hook.url for hook in read_settings(Settings).notify_webhooks] == urls


def test_a_secret_setting_is_not_repeated_in_its_error():
    """A Slack or Discord webhook URL is a secret: the line names the variable, not its value."""
    done = start("orchestrator", {"CRAYFISH_NOTIFY_WEBHOOKS": '[{"url": "ftp://s3cret"}]'})
    assert done.returncode == 2 and "CRAYFISH_NOTIFY_WEBHOOKS" in done.stderr, done.stderr
    assert "s3cret" not in done.stderr


def test_a_model_keys_file_others_can_read_stops_start_up(tmp_path: Path):
    """CRAYFISH_MODEL_KEYS_FILE holds provider keys: mode 0644 is refused, and no key is shown."""
    keys = tmp_path / "keys.env"
    keys.write_text("OPENAI_API_KEY=sk-s3cret-key\n")
    keys.chmod(0o644)
    done = start("orchestrator", {"CRAYFISH_MODEL_KEYS_FILE": str(keys)})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "CRAYFISH_MODEL_KEYS_FILE (" in lines[0] and "mode 0644" in lines[0], lines[0]
    assert "s3cret" not in done.stderr
