"""The migration runner: the functions file gives every SQL function its current body, however
the database got to its version, and the advisory-lock ids in SQL are the ones in store/locks.py."""

from __future__ import annotations

import re
from importlib import resources

import psycopg
import pytest
from orchestrator.store import locks, migrations

from tests.postgres import empty_database, fresh_database

FUNCTION = re.compile(r"CREATE OR REPLACE FUNCTION (\w+)\(.*?\bAS \$\$(.*?)\$\$;", re.DOTALL)
# A lock call with its id on the line, then `-- NAME`; or `(  -- NAME` with the id on the next.
LOCK_SAME_LINE = re.compile(r"advisory_xact_lock\((\d+)[^\n]*?--\s*(\w+)")
LOCK_NEXT_LINE = re.compile(r"advisory_xact_lock\(\s*--\s*(\w+)\s*\n\s*(\d+)")


def functions_file() -> str:
    return resources.files("orchestrator.store").joinpath("sql", "functions.sql").read_text()


async def bodies(conn: psycopg.AsyncConnection) -> dict[str, tuple[str, str]]:
    """Each crayfish_ function's body and full definition, by name."""
    rows = await (
        await conn.execute(
            "SELECT p.proname, p.prosrc, pg_get_functiondef(p.oid) FROM pg_proc p"
            " JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'public' AND p.proname LIKE 'crayfish\\_%'"
        )
    ).fetchall()
    return {name: (body, definition) for name, body, definition in rows}


async def test_a_database_upgraded_release_by_release_has_the_functions_file_bodies(
    monkeypatch: pytest.MonkeyPatch,
):
    said = dict(FUNCTION.findall(functions_file()))
    async with await psycopg.AsyncConnection.connect(empty_database(), autocommit=True) as conn:
        for count in range(1, len(migrations.MIGRATIONS) + 1):  # each release, without the file
            with monkeypatch.context() as old_build:
                old_build.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:count])
                old_build.setattr(migrations, "FUNCTIONS", lambda: "")
                # Versions may skip numbers (reserved for steps merged later).
                assert await migrations.migrate(conn) == [migrations.MIGRATIONS[count - 1].version]
        before = await bodies(conn)
        assert any(before[name][0] != body for name, body in said.items())  # the file changes some
        assert await migrations.migrate(conn) == []  # no step left: the file is applied
        once = await bodies(conn)
        for _ in range(2):
            assert await migrations.migrate(conn) == []
        assert await bodies(conn) == once  # applied again: nothing changes
    assert {name: body for name, (body, _) in once.items()} == said  # every function, as written
    async with await psycopg.AsyncConnection.connect(fresh_database(), autocommit=True) as conn:
        assert await bodies(conn) == once  # the same as a database migrated in one go


async def test_an_older_release_leaves_a_newer_releases_functions_alone(
    monkeypatch: pytest.MonkeyPatch,
):
    """A rolling upgrade: a replica of the release before starts on a database the newer one
    migrated; it must not put its own (older) function bodies back."""
    async with await psycopg.AsyncConnection.connect(fresh_database(), autocommit=True) as conn:
        newest = await bodies(conn)
        with monkeypatch.context() as old_build:
            old_build.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:-1])
            old_build.setattr(migrations, "FUNCTIONS", lambda: OLDER_NOW)
            assert await migrations.migrate(conn) == []
        assert await bodies(conn) == newest
        # The same build on a database of its own version applies its file (the test can fail).
        await conn.execute(
            "DELETE FROM crayfish_schema_version WHERE version = %s",
            (migrations.MIGRATIONS[-1].version,),
        )
        with monkeypatch.context() as old_build:
            old_build.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:-1])
            old_build.setattr(migrations, "FUNCTIONS", lambda: OLDER_NOW)
            assert await migrations.migrate(conn) == []
        assert (await bodies(conn))["crayfish_now"][0].strip() == "SELECT 0::double precision"


OLDER_NOW = """CREATE OR REPLACE FUNCTION crayfish_now() RETURNS double precision
LANGUAGE sql AS $$ SELECT 0::double precision $$;"""


def test_every_advisory_lock_id_in_the_functions_file_is_its_named_constant():
    text = functions_file()
    named = LOCK_SAME_LINE.findall(text) + [
        (lock_id, name) for name, lock_id in LOCK_NEXT_LINE.findall(text)
    ]
    assert len(named) == text.count("advisory_xact_lock(") > 0  # none without its name
    for lock_id, name in named:
        assert getattr(locks, name) == int(lock_id), name
    ids = [value for key, value in vars(locks).items() if key.endswith("_LOCK")]
    assert len(ids) == len(set(ids)) > 0  # one id per lock, none shared
