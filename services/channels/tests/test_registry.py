"""Channels by name: the entry points the package declares are the built-ins the registry
knows, and a channel runs only when configured."""

from __future__ import annotations

import tomllib
from pathlib import Path

from channels.config import ChannelsSettings
from channels.registry import BUILTINS, GROUP, configured

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"


def test_the_declared_entry_points_are_the_builtins() -> None:
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"][GROUP]
    assert declared == BUILTINS


def test_telegram_runs_only_with_a_token() -> None:
    assert configured(ChannelsSettings(telegram_token="")) == []
    [channel] = configured(ChannelsSettings(telegram_token="1:x", telegram_allow_from="5, @bo"))
    assert channel.name == "telegram" and channel.text_limit == 4096
    assert channel.access.allow_from == {"5", "@bo"}


def test_slack_runs_only_with_both_tokens() -> None:
    assert configured(ChannelsSettings(slack_bot_token="xoxb-1")) == []
    assert configured(ChannelsSettings(slack_app_token="xapp-1")) == []
    [channel] = configured(
        ChannelsSettings(slack_bot_token="xoxb-1", slack_app_token="xapp-1", slack_allow_from="U1")
    )
    assert channel.name == "slack" and channel.access.allow_from == {"U1"}


def test_matrix_runs_only_with_an_access_token() -> None:
    assert configured(ChannelsSettings(matrix_access_token="")) == []
    settings = ChannelsSettings(matrix_access_token="syt_x", matrix_allow_from="@a:b.org")
    [channel] = configured(settings)
    assert channel.name == "matrix" and channel.access.allow_from == {"@a:b.org"}


def test_discord_runs_only_with_a_token() -> None:
    assert configured(ChannelsSettings(discord_token="")) == []
    settings = ChannelsSettings(discord_token="abc", discord_allow_from="42", discord_state_file="")
    [channel] = configured(settings)
    assert channel.name == "discord" and channel.text_limit == 2000
    assert channel.access.allow_from == {"42"}
