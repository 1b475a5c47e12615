"""Slack end to end: slack-sdk's AsyncWebClient and Socket Mode client against the fake Slack
on loopback, the channels service as its own process, the real stack behind it; the
conformance suite and Slack's own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.chat_channels.conformance import ChannelConformance
from tests.chat_channels.slack_platform import SlackPlatform
from tests.fakes.slack_api import FakeSlack


@pytest.fixture
def platform() -> Iterator[SlackPlatform]:
    with FakeSlack() as fake:
        yield SlackPlatform(fake)


class TestSlack(ChannelConformance):
    pass
