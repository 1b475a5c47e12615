"""The crayfish-postgres image on its own, started with testcontainers and hardened as compose
runs it: its first start initialises a database that only the password opens, and the
orchestrator's store migrates on it. (pgvector on it: test_stack.py.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from orchestrator.store.migrations import migrate

from tests.compose.stack import free_port

pytestmark = pytest.mark.compose
PASSWORD = "image-test-password"


def connect_when_ready(url: str, timeout: float = 90) -> None:
    """Waits for the first `initdb` and start, as the orchestrator's healthcheck wait does."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(url, connect_timeout=3).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.fixture(scope="module")
def database_url(engine: Any, images: list[str]) -> Iterator[str]:
    port = free_port()
    env = {"POSTGRES_HOST": "127.0.0.1", "PGPORT": str(port), "POSTGRES_PASSWORD": PASSWORD}
    box = engine.container("crayfish-postgres:latest", env=env).with_kwargs(
        network_mode="host",  # the private engine has no bridge: loopback only
        user="10001:10001",
        read_only=True,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges:true"],
    )
    box.with_tmpfs_mount("/tmp", "size=64m")  # docker's mount options, passed as given
    with box:
        url = f"postgresql://crayfish:{PASSWORD}@127.0.0.1:{port}/crayfish"
        try:
            connect_when_ready(url)
        except psycopg.OperationalError:
            stdout, stderr = box.get_logs()
            pytest.fail(f"crayfish-postgres never answered:\n{(stdout + stderr).decode()[-3000:]}")
        yield url


def test_only_the_password_logs_in(database_url: str):
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(database_url.replace(PASSWORD, "wrong"), connect_timeout=5).close()


def test_the_orchestrators_store_migrates_on_it(database_url: str):
    async def run() -> tuple[list[int], list[int]]:
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            return await migrate(conn), await migrate(conn)

    first, again = asyncio.run(run())
    assert first and again == []  # every step applied once, none twice
    with psycopg.connect(database_url) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables").fetchall()}
    assert {"sessions", "tasks"} <= tables
