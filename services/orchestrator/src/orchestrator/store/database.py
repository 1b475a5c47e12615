"""The connection pool (psycopg 3, async) and the locks every replica agrees on."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import orjson
import psycopg
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import set_json_dumps
from psycopg_pool import AsyncConnectionPool

from orchestrator.store.migrations import migrate

log = logging.getLogger(__name__)

Connection = psycopg.AsyncConnection[DictRow]

# Advisory lock namespaces (first key of pg_advisory_xact_lock(int, int)).
SESSION_LOCK = 72104


class Database:
    """A pool of autocommit connections to the store; `transaction()` for several statements."""

    def __init__(self, url: str, max_connections: int = 20):
        if not url:
            raise ValueError(
                "CRAYFISH_DATABASE_URL is unset: name a PostgreSQL server "
                "(`make run` starts one for you)"
            )
        self.url = url
        self.pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            url,
            connection_class=psycopg.AsyncConnection[DictRow],
            min_size=2,
            max_size=max_connections,
            # Not `autocommit` in kwargs: the job queue opens its listening connection with
            # these kwargs plus its own autocommit=True.
            kwargs={"row_factory": dict_row},
            configure=_configure,
            # No `check` on each checkout (a round trip per query): a connection the server
            # dropped fails one query and is then replaced by the pool.
            open=False,
            name="crayfish",
        )

    async def open(self) -> None:
        """Connects and brings the schema up to date (one replica at a time)."""
        await self.pool.open(wait=True, timeout=30)
        async with self.pool.connection() as conn:
            await migrate(conn)

    async def close(self) -> None:
        await self.pool.close()

    async def check(self) -> tuple[bool, str]:
        """(answers, why not) within 2 s."""
        try:
            async with asyncio.timeout(2.0), self.connection() as conn:
                await conn.execute("SELECT 1")
        except Exception as exc:
            return False, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return True, ""

    @property
    def address(self) -> str:
        """Where the server is, without credentials."""
        info = psycopg.conninfo.conninfo_to_dict(self.url)
        return f"{info.get('host', 'localhost')}/{info.get('dbname', '')}"

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        with _disk_full_as_os_error():
            async with self.pool.connection() as conn:
                yield conn

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        """A connection inside one transaction: committed on exit, rolled back on an error."""
        with _disk_full_as_os_error():
            async with self.pool.connection() as conn, conn.transaction():
                yield conn


@contextmanager
def _disk_full_as_os_error() -> Iterator[None]:
    """The server's full disk as the OSError a full local disk raises (HTTP 507, a failed turn
    saying "No space left on device")."""
    try:
        yield
    except psycopg.errors.DiskFull as exc:
        detail = str(exc).splitlines()[0]
        raise OSError(errno.ENOSPC, f"the database's disk is full ({detail})") from exc


async def _configure(conn: Connection) -> None:
    await conn.set_autocommit(True)
    set_json_dumps(json_for_server, conn)


def json_for_server(value: Any) -> bytes:
    """JSON parameters (events, messages) by orjson, ~10x json.dumps; by json.dumps what orjson
    refuses (keys that are not strings, integers past 64 bits, lone surrogates), as before."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(value).encode()


async def lock_session(conn: Connection, session_id: str) -> None:
    """Holds the session to the end of the transaction: a turn's start and a session's delete
    take it, so neither sees the other half done (on any replica)."""
    await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (SESSION_LOCK, session_id))
