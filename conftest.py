"""Shared by every test: the session's PostgreSQL server is stopped when the session ends."""

from __future__ import annotations

import pytest

from tests import postgres


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    postgres.stop_server()
