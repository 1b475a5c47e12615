"""Integration fixture: all four services as local processes on free ports, with the fake LLM."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from crayfish_common.launcher import LocalStack, free_port

from tests.fakes import FakeLLM

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


def _workspace_root() -> Path:
    """A folder the sandbox uid can traverse (pytest's own tmp dirs are mode 0700)."""
    root = Path(tempfile.mkdtemp(prefix="crayfish-it-"))
    root.chmod(0o755)
    return root


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture(autouse=True)
def _fresh_script(fake_llm: FakeLLM) -> Iterator[None]:
    yield
    fake_llm.reply_forever_with(None)
    while fake_llm.pending:
        fake_llm._queue.popleft()


@pytest.fixture(scope="module")
def stack(fake_llm: FakeLLM) -> Iterator[LocalStack]:
    root = _workspace_root()
    workspace = root / "workspace"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text(MEMORY_MD)
    (workspace / "skills" / "weather-report").mkdir(parents=True)
    (workspace / "skills" / "weather-report" / "SKILL.md").write_text(SKILL_MD)
    stack = LocalStack(
        workspace=workspace,
        data_dir=root / "data",
        http_port=free_port(),
        log_dir=root / "logs",
        extra_env={
            "OPENAI_BASE_URL": fake_llm.base_url,
            "OPENAI_API_KEY": "sk-integration",
            "CRAYFISH_MODEL": "fake-model",
            "CRAYFISH_LLM_RETRY_BASE_DELAY": "0.01",
        },
    )
    stack.start()
    try:
        stack.wait_healthy(timeout=180)
    except Exception:
        stack.stop()
        _dump_logs(root / "logs")
        raise
    yield stack
    pids = [p.pid for p in stack.processes.values()]
    stack.stop()
    assert not [pid for pid in pids if _alive(pid)], "a service outlived the stack"
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def api(stack: LocalStack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.url, timeout=60) as client:
        yield client


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _dump_logs(folder: Path) -> None:
    for log in sorted(folder.glob("*.log")):
        print(f"----- {log.name} -----\n{log.read_text(errors='replace')[-4000:]}")
