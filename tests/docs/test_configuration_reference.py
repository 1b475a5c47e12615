"""docs/configuration.md's reference is what scripts/gen_config_docs.py makes of the settings
classes as they are now, and the generator refuses a setting nobody described."""

from __future__ import annotations

import difflib
from typing import Literal

import pytest
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from scripts import gen_config_docs as gen


class Described(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SAMPLE_")

    # What the sample is called.
    name: str = ""
    # --- Limits ---
    # Seconds a call may take.
    timeout: float = Field(2.5, gt=0)


class Undescribed(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SAMPLE_")

    # How it runs.
    mode: Literal["fast", "slow"] = "fast"
    retries: int = 3


def test_the_reference_matches_the_settings_classes() -> None:
    written = gen.DOC.read_text()
    wanted = gen.render(written)
    if written != wanted:
        diff = difflib.unified_diff(written.splitlines(), wanted.splitlines(), lineterm="", n=0)
        shown = "\n".join(list(diff)[2:40])
        pytest.fail(f"{gen.DOC.name} is out of date: run `{gen.COMMAND}`\n{shown}")


def test_a_stale_reference_is_seen_and_made_anew() -> None:
    written = gen.DOC.read_text()
    kept, generated = written.split(gen.MARKER)
    row = next(line for line in generated.splitlines() if line.startswith("| `CRAYFISH_MODEL` |"))
    stale = kept + gen.MARKER + generated.replace(row + "\n", "")
    assert gen.render(stale) != stale
    assert gen.render(stale) == written


def test_a_row_has_the_variable_type_default_comment_and_section() -> None:
    assert gen.rows(Described) == [
        gen.Row("`SAMPLE_NAME`", "str", "empty", "What the sample is called.", ""),
        gen.Row("`SAMPLE_TIMEOUT`", "float, > 0", "`2.5`", "Seconds a call may take.", "Limits"),
    ]


def test_a_setting_without_a_description_is_refused_by_name() -> None:
    with pytest.raises(gen.Undocumented) as refused:
        gen.rows(Undescribed)
    assert refused.value.args[0] == [
        "Undescribed.retries (tests/docs/test_configuration_reference.py)"
    ]
