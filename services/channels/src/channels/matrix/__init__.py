"""The Matrix channel: the client-server API through matrix-nio's AsyncClient."""

from __future__ import annotations

from channels.config import ChannelsSettings
from channels.contract import Channel


def factory(settings: ChannelsSettings) -> Channel | None:
    """The `crayfish.channels` entry point: the channel when CHANNELS_MATRIX_ACCESS_TOKEN is set
    (its SDK is imported only then: some take seconds to import)."""
    if not settings.matrix_access_token:
        return None
    from channels.matrix.channel import MatrixChannel

    return MatrixChannel(settings)
