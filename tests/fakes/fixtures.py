"""pytest fixtures for the fake LLM; import them into a conftest.py to use them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .fake_llm import FakeLLM


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A started FakeLLM on a free loopback port, stopped after the test."""
    with FakeLLM() as server:
        yield server
