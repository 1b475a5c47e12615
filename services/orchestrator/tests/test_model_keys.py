"""CRAYFISH_MODEL_KEYS_FILE: a provider key added, rotated or removed in the file serves the next
request without a restart (a FakeLLM that accepts only the key in force, as a provider does after
a rotation); a broken edit keeps the last good keys and is logged once, without values."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from orchestrator.agent.llm import LLMClient
from orchestrator.agent.model_keys import CHECK_EVERY

from tests.fakes import FakeLLM, Reply
from tests.fakes.completions import ErrorReply

from .conftest import settings_from_env


def write_keys(path: Path, text: str, mode: int = 0o600) -> None:
    """Rewrites the file in place (as an editor that keeps the inode does)."""
    path.write_text(text)
    path.chmod(mode)


async def after_next_look() -> None:
    """Past the interval between two looks at the file (this waits; it asserts nothing)."""
    await asyncio.sleep(CHECK_EVERY + 0.1)


def accept_only(fake: FakeLLM, valid: dict[str, str]) -> None:
    """The provider answers the key in `valid["key"]`, and refuses any other with a 401."""

    def answer(body: dict[str, Any]) -> Reply:
        if fake.request_headers[-1].get("authorization") == f"Bearer {valid['key']}":
            return Reply(text="answered")
        return Reply(error=ErrorReply(401, "Incorrect API key", "invalid_request_error", None, {}))

    fake.reply_forever_with(answer)


def one_preset(url: str, keys: str | list[str] = "KEY_A") -> str:
    return json.dumps([{"name": "p", "base_url": url, "model": "m", "api_key_env": keys}])


def bearers(fake: FakeLLM, since: int = 0) -> list[str]:
    return [h["authorization"].removeprefix("Bearer ") for h in fake.request_headers[since:]]


async def test_a_key_rotated_in_the_file_serves_the_next_turn_without_a_restart(
    core_factory: Any, fake_llm: FakeLLM, tmp_path: Path
):
    keys = tmp_path / "keys.env"
    write_keys(keys, "# provider keys\nKEY_A=sk-file-old\n")
    valid = {"key": "sk-file-old"}
    accept_only(fake_llm, valid)
    core = await core_factory(
        CRAYFISH_MODELS=one_preset(fake_llm.base_url),
        CRAYFISH_MODEL_KEYS_FILE=str(keys),
        KEY_A="sk-env-stale",  # the file is looked up first
        CRAYFISH_LLM_RETRIES=0,
        CRAYFISH_AUTO_RECALL="false",
    )
    first = await core.turns.wait((await core.submit("s1", "hello")).id, 30)
    assert (first.status, first.result) == ("completed", "answered"), first.error
    assert bearers(fake_llm) == ["sk-file-old"]

    valid["key"] = "sk-file-new"  # the provider revokes the old key; the operator edits the file
    write_keys(keys, "# provider keys\nKEY_A=sk-file-new\n")
    await after_next_look()
    seen = len(fake_llm.request_headers)
    second = await core.turns.wait((await core.submit("s1", "again")).id, 30)
    assert (second.status, second.result) == ("completed", "answered"), second.error
    assert bearers(fake_llm, seen) == ["sk-file-new"]


async def test_a_broken_edit_keeps_the_old_key_and_is_logged_once_without_values(
    fake_llm: FakeLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    keys = tmp_path / "keys.env"
    write_keys(keys, "KEY_A=sk-good-key\n")
    fake_llm.reply_forever_text("ok")
    settings = settings_from_env(
        {"CRAYFISH_MODELS": one_preset(fake_llm.base_url), "CRAYFISH_MODEL_KEYS_FILE": keys}
    )
    llm = LLMClient(settings)
    ask = [{"role": "user", "content": "hi"}]
    try:
        await llm.complete(ask)
        write_keys(keys, "KEY_A sk-half-typed-key\n")  # no `=`
        await after_next_look()
        with caplog.at_level(logging.WARNING, logger="orchestrator.agent.model_keys"):
            await llm.complete(ask)
            await after_next_look()
            await llm.complete(ask)  # the same broken file: not logged again
        write_keys(keys, "KEY_A=sk-fixed-key\n")
        await after_next_look()
        await llm.complete(ask)
    finally:
        await llm.close()
    assert bearers(fake_llm) == ["sk-good-key", "sk-good-key", "sk-good-key", "sk-fixed-key"]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1, warnings
    assert "CRAYFISH_MODEL_KEYS_FILE" in warnings[0] and "line 1" in warnings[0]
    assert "stay in use" in warnings[0] and "sk-" not in caplog.text


async def test_a_removed_key_is_not_used_and_a_changed_key_starts_without_cooldown(
    fake_llm: FakeLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    keys = tmp_path / "keys.env"
    write_keys(keys, "K1=sk-one-old\nK2=sk-two-old\nK3=sk-three\n")
    settings = settings_from_env(
        {
            "CRAYFISH_MODELS": one_preset(fake_llm.base_url, ["K1", "K2", "K3"]),
            "CRAYFISH_MODEL_KEYS_FILE": keys,
            "CRAYFISH_LLM_RETRIES": 0,
        }
    )
    llm = LLMClient(settings)
    ask = [{"role": "user", "content": "hi"}]
    fake_llm.reply(Reply(error=ErrorReply(429, "slow down", "rate_limit", None, {})))
    fake_llm.reply_forever_text("ok")
    try:
        with caplog.at_level(logging.INFO, logger="orchestrator"):
            await llm.complete(ask)  # K1 is rate limited (cools down for a minute): K2 serves
            # K1 and K2 rotated: the new K1 is tried at once, though the old one cooled down.
            write_keys(keys, "K1=sk-one-new\nK2=sk-two-new\nK3=sk-three\n")
            await after_next_look()
            await llm.complete(ask)
            write_keys(keys, "K2=sk-two-new\nK3=sk-three\n")  # K1 removed
            await after_next_look()
            await llm.complete(ask)
            write_keys(keys, "# every key gone\n")  # the preset would have none: kept
            await after_next_look()
            await llm.complete(ask)
    finally:
        await llm.close()
    assert bearers(fake_llm) == [
        "sk-one-old",
        "sk-two-old",
        "sk-one-new",
        "sk-two-new",
        "sk-two-new",
    ]
    assert "preset 'p' would have no key left (K1, K2, K3)" in caplog.text
    assert "sk-" not in caplog.text


async def test_the_single_preset_takes_openai_api_key_from_the_file(
    fake_llm: FakeLLM, tmp_path: Path
):
    keys = tmp_path / "keys.env"
    write_keys(keys, "export OPENAI_API_KEY='sk-from-file'\n", mode=0o400)
    fake_llm.reply_forever_text("ok")
    settings = settings_from_env(
        {
            "OPENAI_BASE_URL": fake_llm.base_url,
            "OPENAI_API_KEY": "sk-from-env",
            "CRAYFISH_MODEL": "m",
            "CRAYFISH_MODEL_KEYS_FILE": keys,
        }
    )
    llm = LLMClient(settings)
    try:
        await llm.complete([{"role": "user", "content": "hi"}])
        keys.chmod(0o600)
        write_keys(keys, "# removed: the environment's again\n")
        await after_next_look()
        await llm.complete([{"role": "user", "content": "hi"}])
    finally:
        await llm.close()
    assert bearers(fake_llm) == ["sk-from-file", "sk-from-env"]
    assert "sk-from" not in repr(settings) + repr(settings.presets) + repr(settings.model_keys)


@pytest.mark.parametrize(
    ("text", "mode", "fault"),
    [
        ("KEY_A=sk-secret-value\n", 0o644, "mode 0644; it must be 0600 or 0400"),
        ("KEY_A=sk-secret-value\nKEY_A=sk-secret-value\n", 0o600, "line 2: KEY_A is set twice"),
        ("# a key pasted alone:\nsk_secret_value\n", 0o600, "line 2: expected NAME=value"),
        ("KEY_A=\n", 0o600, "KEY_A has an empty value"),
    ],
)
def test_an_unusable_file_stops_start_up_naming_the_fault(
    tmp_path: Path, text: str, mode: int, fault: str
):
    keys = tmp_path / "keys.env"
    write_keys(keys, text, mode)
    with pytest.raises(ValueError) as caught:
        settings_from_env({"CRAYFISH_MODEL_KEYS_FILE": keys})
    message = str(caught.value)
    assert f"CRAYFISH_MODEL_KEYS_FILE ({keys})" in message and fault in message, message
    assert "secret" not in message


def test_a_file_in_the_workspace_is_refused(tmp_path: Path):
    """Sandboxed commands read the workspace: a keys file there would hand them the keys."""
    (tmp_path / "workspace").mkdir()
    keys = tmp_path / "workspace" / "keys.env"
    write_keys(keys, "KEY_A=sk-secret-value\n")
    with pytest.raises(ValueError) as caught:
        settings_from_env(
            {"CRAYFISH_WORKSPACE": tmp_path / "workspace", "CRAYFISH_MODEL_KEYS_FILE": keys}
        )
    assert "inside the workspace, where commands can read it" in str(caught.value)


def test_without_a_file_keys_come_from_the_environment_as_before():
    settings = settings_from_env({"OPENAI_API_KEY": "sk-env-only", "CRAYFISH_MODEL_KEYS_FILE": ""})
    assert settings.model_keys_file is None
    assert settings.presets.chosen().keys == ("sk-env-only",)


async def test_the_llm_probe_sees_a_key_added_to_the_file(core_factory: Any, tmp_path: Path):
    """/readyz's `llm` entry: OpenAI without a key is "not configured" until the file has one
    (only `configured` is read here: a probe would go to api.openai.com)."""
    keys = tmp_path / "keys.env"
    write_keys(keys, "# no key yet\n")
    core = await core_factory(
        OPENAI_BASE_URL="https://api.openai.com/v1",
        OPENAI_API_KEY="",
        CRAYFISH_MODEL_KEYS_FILE=str(keys),
    )
    assert not core.llm_probe.configured
    write_keys(keys, "OPENAI_API_KEY=sk-added-later\n")
    await after_next_look()
    assert core.llm_probe.configured
