"""A small monitoring database in a temporary SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest


def make_database(path: Path) -> Path:
    with sqlite3.connect(path) as connection:
        connection.executescript(
            """
            CREATE TABLE hosts (id INTEGER PRIMARY KEY, name TEXT, datacenter TEXT);
            CREATE TABLE cpu (host_id INTEGER, minute INTEGER, percent REAL, note BLOB);
            INSERT INTO hosts VALUES (1, 'web-1', 'fra'), (2, 'web-2', 'fra'), (3, 'db-1', 'ams');
            """
        )
        connection.executemany(
            "INSERT INTO cpu VALUES (?, ?, ?, ?)",
            [(h, m, (h * 37 + m * 11) % 100, b"\x00\x01") for h in (1, 2, 3) for m in range(300)],
        )
    connection.close()
    return path


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return make_database(tmp_path / "monitoring.db")
