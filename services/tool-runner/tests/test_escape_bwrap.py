"""The escape suite against the bwrap backend (the default), through the gRPC API."""

from __future__ import annotations

import pytest

from .escape_cases import CASES


@pytest.mark.parametrize("name", sorted(CASES))
async def test_escape_attempt_fails(tight, name):
    await CASES[name](tight)
