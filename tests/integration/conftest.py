"""Integration fixture: all four services as local processes on free ports, with the fake LLM."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM
from tests.stacks import running_stack

MEMORY_MD = """# Memory

## People
- Ada is the user's sister; she lives in Lisbon and plays the cello.

## Decisions
- 2026-03-02: we chose PostgreSQL over MySQL for the billing service because of JSONB.
- The team's weekly sync moved to Thursdays at 10:00.
"""

SKILL_MD = """---
name: weather-report
description: Write a short weather report for a city from a forecast file.
---
# Weather report
Read `forecast.json`, then write three sentences.
"""


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture(autouse=True)
def _fresh_script(fake_llm: FakeLLM) -> Iterator[None]:
    yield
    fake_llm.reset()


@pytest.fixture(scope="module")
def stack(fake_llm: FakeLLM) -> Iterator[LocalStack]:
    files = {"MEMORY.md": MEMORY_MD, "skills/weather-report/SKILL.md": SKILL_MD}
    with running_stack(fake_llm.base_url, files) as stack:
        yield stack


@pytest.fixture
def api(stack: LocalStack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.url, timeout=60) as client:
        yield client
