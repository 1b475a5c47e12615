"""Channels by name: the `crayfish.channels` entry-point group (the built-in Telegram too).

A third-party channel's distribution declares
    [project.entry-points."crayfish.channels"]
    my-chat = "my_package.module:factory"
where `factory(settings: ChannelsSettings) -> Channel | None` (None: not configured, so not
run) and reads its own `CHANNELS_MY_CHAT_…` settings; it passes channels.conformance."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from importlib.metadata import entry_points

from channels.config import ChannelsSettings
from channels.contract import Channel

log = logging.getLogger(__name__)
GROUP = "crayfish.channels"
# What services/channels/pyproject.toml registers; used as is when the package runs from
# source without being installed (no dist-info, so no entry points).
BUILTINS = {
    "telegram": "channels.telegram:factory",
    "slack": "channels.slack:factory",
    "matrix": "channels.matrix:factory",
    "discord": "channels.discord:factory",
    "email": "channels.email:factory",
    "qq": "channels.qq:factory",
    "feishu": "channels.feishu:factory",
}

ChannelFactory = Callable[[ChannelsSettings], Channel | None]


def factories() -> dict[str, ChannelFactory]:
    """Every registered channel's factory; a built-in name always means the built-in."""
    found: dict[str, ChannelFactory] = {}
    for ep in entry_points(group=GROUP):
        if ep.name in BUILTINS:
            continue
        try:
            found[ep.name] = ep.load()
        except Exception as exc:  # one broken plug-in never stops the others
            log.error("channel %s (%s) could not be loaded: %s", ep.name, ep.value, exc)
    for name, target in BUILTINS.items():
        module, _, attribute = target.partition(":")
        found[name] = getattr(importlib.import_module(module), attribute)
    return found


def configured(settings: ChannelsSettings) -> list[Channel]:
    """The channels whose settings are given."""
    made = (factory(settings) for factory in factories().values())
    return [channel for channel in made if channel is not None]
