"""CRAYFISH_MODELS and its companions read into presets: a file, key lists, the legacy preset,
and the faults that stop start-up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from crayfish_common.settings_errors import BadSettings, read_settings
from orchestrator.config import Settings

from .conftest import settings_from_env

TWO = [
    {"name": "main", "base_url": "http://a.test/v1", "model": "big", "api_key_env": ["K1", "K2"]},
    {"name": "cheap", "base_url": "http://b.test/v1", "model": "small", "api_key_env": "K3, K4"},
]


def test_presets_come_from_a_file_with_keys_by_variable(tmp_path: Path):
    path = tmp_path / "models.json"
    path.write_text(json.dumps(TWO))
    env = {"CRAYFISH_MODELS": f"@{path}", "K1": "a", "K2": "b", "K3": "c", "K4": "d"}
    presets = settings_from_env({**env, "CRAYFISH_MODEL_FALLBACKS": "cheap"}).presets
    assert presets.names == ["main", "cheap"] and presets.default == "main"
    assert presets["main"].keys == ("a", "b") and presets["cheap"].key_names == ("K3", "K4")
    assert [p.name for p in presets.candidates("cheap")] == ["cheap"]
    assert [p.name for p in presets.candidates("main")] == ["main", "cheap"]
    assert "'a'" not in repr(presets)  # keys never in a repr (logs, tracebacks)


def test_without_crayfish_models_the_old_variables_make_the_one_preset():
    env = {"OPENAI_BASE_URL": "http://c.test/v1", "OPENAI_API_KEY": "sk", "CRAYFISH_MODEL": "m"}
    presets = settings_from_env(env).presets
    assert presets.names == ["m"] and presets.default == "m"
    preset = presets["m"]
    assert (preset.base_url, preset.keys, preset.key_label(0)) == (
        "http://c.test/v1",
        ("sk",),
        "OPENAI_API_KEY",
    )


@pytest.mark.parametrize(
    ("env", "fault"),
    [
        ({"CRAYFISH_MODELS": json.dumps([TWO[0], TWO[0]])}, "the name 'main' is used twice"),
        ({"CRAYFISH_MODELS": "[]"}, "expected a non-empty JSON list"),
        ({"CRAYFISH_MODELS": json.dumps([{**TWO[0], "base_url": "a.test"}])}, "http://"),
        ({"CRAYFISH_MODELS": json.dumps([{**TWO[0], "name": "a b"}])}, "a name is 1-64"),
        ({"CRAYFISH_MODEL_DEFAULT": "nope"}, "CRAYFISH_MODEL_DEFAULT: no preset named 'nope'"),
        ({"CRAYFISH_MODEL_BACKGROUND": "x"}, "CRAYFISH_MODEL_BACKGROUND: no preset named 'x'"),
    ],
)
def test_a_fault_names_the_variable(
    env: dict[str, str], fault: str, monkeypatch: pytest.MonkeyPatch
):
    for name, value in {"K1": "a", "K2": "b", **env}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(BadSettings) as caught:
        read_settings(Settings)
    assert fault in str(caught.value)
