"""The connection pool (psycopg 3, async) and the locks every replica agrees on."""

from __future__ import annotations

import asyncio
import contextlib
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
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from orchestrator.store.locks import SESSION_LOCK
from orchestrator.store.migrations import migrate

log = logging.getLogger(__name__)

Connection = psycopg.AsyncConnection[DictRow]

# Seconds a connection attempt may take (a server that accepts but does not answer).
CONNECT_TIMEOUT = 5
# Seconds a request waits for a pooled connection: while the server answers (a busy pool), and
# while it does not (a connection was lost and none made since), so it is told 503 at once.
ACQUIRE_TIMEOUT = 30.0
UNREACHABLE_WAIT = 1.0
# How long one pool connection attempt retries (after 1 s, 2 s, ...) before it gives up; the
# next request starts another. psycopg_pool's default (300 s) doubles its waits to 32 s and
# more, so a server back after 30 s down went unused for ~50 s.
RECONNECT_WINDOW = 4.0
# SQLSTATE classes of a server that cannot be reached (none: the client lost the connection).
LOST_STATES = ("08", "57P", "53300")


class StoreUnavailable(psycopg.OperationalError):
    """The database cannot be reached or refuses writes for now (down, restarting, read-only):
    HTTP 503; a turn's outcome is recorded once it answers again."""


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
            kwargs={"row_factory": dict_row, "connect_timeout": CONNECT_TIMEOUT},
            configure=self._configure,
            timeout=ACQUIRE_TIMEOUT,
            reconnect_timeout=RECONNECT_WINDOW,
            reconnect_failed=self._unreachable,
            # No `check` on each checkout (a round trip per query): a connection the server
            # dropped fails one query and is then replaced by the pool.
            open=False,
            name="crayfish",
        )
        self.reachable = True  # False from a lost connection until a new one is made
        self._checking: asyncio.Task[None] | None = None

    async def open(self, within: float = 30.0) -> None:
        """Connects (waiting up to `within` seconds for the server) and brings the schema up to date
        (one replica at a time)."""
        await self.pool.open()
        deadline = asyncio.get_running_loop().time() + within
        while True:
            try:  # each try starts a connection attempt (one gives up after RECONNECT_WINDOW)
                async with self.pool.connection(timeout=RECONNECT_WINDOW) as conn:
                    await migrate(conn)
                break
            except PoolTimeout:
                if asyncio.get_running_loop().time() >= deadline:
                    raise
        await self.pool.wait(timeout=within)  # its min_size connections, as requests expect

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
        with self._mapped_errors():
            async with self.pool.connection(timeout=self._acquire_timeout()) as conn:
                yield conn

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        """A connection inside one transaction: committed on exit, rolled back on an error."""
        with self._mapped_errors():
            async with (
                self.pool.connection(timeout=self._acquire_timeout()) as conn,
                conn.transaction(),
            ):
                yield conn

    def _acquire_timeout(self) -> float:
        return ACQUIRE_TIMEOUT if self.reachable else UNREACHABLE_WAIT

    @contextmanager
    def _mapped_errors(self) -> Iterator[None]:
        """The server's full disk as the OSError a full local disk raises (HTTP 507, a failed
        turn saying "No space left on device"); an unreachable or read-only server, or no
        connection in time, as StoreUnavailable (HTTP 503)."""
        try:
            yield
        except psycopg.errors.DiskFull as exc:
            raise OSError(
                errno.ENOSPC, f"the database's disk is full ({_first_line(exc)})"
            ) from exc
        except StoreUnavailable:
            raise
        except PoolTimeout as exc:
            why = "unreachable" if not self.reachable else "busy: no free connection"
            raise StoreUnavailable(f"the database is {why} ({_first_line(exc)})") from exc
        except psycopg.errors.ReadOnlySqlTransaction as exc:
            raise StoreUnavailable(f"the database refuses writes ({_first_line(exc)})") from exc
        except psycopg.OperationalError as exc:
            if not exc.sqlstate or exc.sqlstate.startswith(LOST_STATES):
                self._unreachable()
                raise StoreUnavailable(f"the database is unreachable ({_first_line(exc)})") from exc
            raise

    def _unreachable(self, _pool: object = None) -> None:
        """A connection was lost (or could not be made): requests wait briefly from now on, and
        the pool's idle connections are checked, so the dead ones go at once, not one per
        request."""
        if self.reachable:
            log.warning("the database is unreachable: answering 503 until it is back")
        self.reachable = False
        if self._checking is None or self._checking.done():
            self._checking = asyncio.get_running_loop().create_task(self._check_idle())

    async def _check_idle(self) -> None:
        with contextlib.suppress(Exception):
            await self.pool.check()

    async def _configure(self, conn: Connection) -> None:
        await conn.set_autocommit(True)
        set_json_dumps(json_for_server, conn)
        if not self.reachable:
            log.warning("the database answers again")
        self.reachable = True


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


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
