"""Matrix end to end: matrix-nio against the fake homeserver on loopback, the channels service
as its own process, the real stack behind it; the conformance suite and Matrix's own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.chat_channels.conformance import ChannelConformance
from tests.chat_channels.matrix_platform import MatrixPlatform
from tests.fakes.matrix_homeserver import FakeHomeserver


@pytest.fixture
def platform() -> Iterator[MatrixPlatform]:
    with FakeHomeserver() as fake:
        yield MatrixPlatform(fake)


class TestMatrix(ChannelConformance):
    pass
