"""Feishu end to end: lark-oapi's IM client and its event long connection against the fake
Feishu on loopback, the channels service as its own process, the real stack behind it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.chat_channels.conformance import ChannelConformance
from tests.chat_channels.feishu_platform import FeishuPlatform
from tests.fakes.feishu_api import FakeFeishu


@pytest.fixture
def platform() -> Iterator[FeishuPlatform]:
    with FakeFeishu() as fake:
        yield FeishuPlatform(fake)


class TestFeishu(ChannelConformance):
    pass
