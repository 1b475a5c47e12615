"""The escape suite against the docker backend, on a private engine the fixture starts."""

from __future__ import annotations

import pytest

from .escape_cases import CASES

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("name", sorted(CASES))
async def test_escape_attempt_fails(docker_tight, name):
    await CASES[name](docker_tight)
