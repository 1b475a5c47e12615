"""Fixtures every cross-service test shares: the fake LLM, the whole stack, a REST client.

A test module shapes its stack with module-level names, read when the stack starts:
`STACK_FILES` (workspace files, default: a MEMORY.md and one skill), `STACK_ENV` (extra
environment) and `API_TOKEN` (set as CRAYFISH_API_TOKEN and sent by `api`).
"""

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

DEFAULT_FILES = {"MEMORY.md": MEMORY_MD, "skills/weather-report/SKILL.md": SKILL_MD}


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture(autouse=True)
def _fresh_script(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test starts with an empty script (when it uses the fake LLM at all)."""
    uses = "fake_llm" in request.fixturenames
    fake = request.getfixturevalue("fake_llm") if uses else None  # set up first, torn down last
    yield
    if fake is not None:
        fake.reset()


@pytest.fixture(scope="module")
def stack(fake_llm: FakeLLM, request: pytest.FixtureRequest) -> Iterator[LocalStack]:
    files = getattr(request.module, "STACK_FILES", DEFAULT_FILES)
    env = dict(getattr(request.module, "STACK_ENV", {}))
    token = getattr(request.module, "API_TOKEN", "")
    if token:
        env["CRAYFISH_API_TOKEN"] = token
    with running_stack(fake_llm.base_url, files, env) as stack:
        yield stack


@pytest.fixture
def api(stack: LocalStack, request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    token = getattr(request.module, "API_TOKEN", "")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=stack.url, timeout=60, headers=headers) as client:
        yield client
