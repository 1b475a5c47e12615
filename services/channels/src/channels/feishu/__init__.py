"""The Feishu/Lark channel: lark-oapi's IM API and its event long connection."""

from __future__ import annotations

from channels.config import ChannelsSettings
from channels.contract import Channel


def factory(settings: ChannelsSettings) -> Channel | None:
    """The `crayfish.channels` entry point: the channel when CHANNELS_FEISHU_APP_ID is set
    (its SDK is imported only then: some take seconds to import)."""
    if not settings.feishu_app_id:
        return None
    from channels.feishu.channel import FeishuChannel

    return FeishuChannel(settings)
