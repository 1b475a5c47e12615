"""The Telegram channel: the Bot API through python-telegram-bot."""

from __future__ import annotations

from channels.config import ChannelsSettings
from channels.contract import Channel


def factory(settings: ChannelsSettings) -> Channel | None:
    """The `crayfish.channels` entry point: the channel when CHANNELS_TELEGRAM_TOKEN is set
    (its SDK is imported only then: some take seconds to import)."""
    if not settings.telegram_token:
        return None
    from channels.telegram.channel import TelegramChannel

    return TelegramChannel(settings)
