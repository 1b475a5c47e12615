"""The QQ channel: OneBot v11 over a forward WebSocket, as NapCat serves it."""

from __future__ import annotations

from channels.config import ChannelsSettings
from channels.contract import Channel


def factory(settings: ChannelsSettings) -> Channel | None:
    """The `crayfish.channels` entry point: the channel when CHANNELS_QQ_URL is set
    (its SDK is imported only then: some take seconds to import)."""
    if not settings.qq_url:
        return None
    from channels.qq.channel import QQChannel

    return QQChannel(settings)
