"""The Slack channel: the Web API and Socket Mode through slack-sdk."""

from __future__ import annotations

from channels.config import ChannelsSettings
from channels.contract import Channel


def factory(settings: ChannelsSettings) -> Channel | None:
    """The `crayfish.channels` entry point: the channel when both Slack tokens are set
    (its SDK is imported only then: some take seconds to import)."""
    if not (settings.slack_bot_token and settings.slack_app_token):
        return None
    from channels.slack.channel import SlackChannel

    return SlackChannel(settings)
