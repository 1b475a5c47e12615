"""The Discord channel: REST through discord.py's HTTPClient, the gateway read here."""

from __future__ import annotations

from channels.config import ChannelsSettings
from channels.contract import Channel


def factory(settings: ChannelsSettings) -> Channel | None:
    """The `crayfish.channels` entry point: the channel when CHANNELS_DISCORD_TOKEN is set
    (its SDK is imported only then: some take seconds to import)."""
    if not settings.discord_token:
        return None
    from channels.discord.channel import DiscordChannel

    return DiscordChannel(settings)
