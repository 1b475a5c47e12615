"""db_query's domain: reading works, parameters bind, caps hold, and nothing can write."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from db_query_tool.query import QueryLimits, QueryRefused, ReadOnlyDatabase


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_parameterised_select_returns_columns_and_rows(database: Path):
    db = ReadOnlyDatabase(database, QueryLimits())
    result = db.query(
        "SELECT name, datacenter FROM hosts WHERE datacenter = ? ORDER BY id", ["fra"]
    )
    assert result.columns == ["name", "datacenter"]
    assert result.rows == [["web-1", "fra"], ["web-2", "fra"]]
    assert not result.truncated


def test_a_value_in_params_is_data_not_sql(database: Path):
    db = ReadOnlyDatabase(database, QueryLimits())
    result = db.query("SELECT count(*) FROM hosts WHERE name = ?", ["x' OR '1'='1"])
    assert result.rows == [[0]]


def test_rows_past_the_cap_are_cut_and_said_so(database: Path):
    db = ReadOnlyDatabase(database, QueryLimits(max_rows=5))
    result = db.query("SELECT * FROM cpu")
    assert len(result.rows) == 5 and result.truncated
    assert result.rows[0][3] == "<2 bytes>"  # blobs are described, not dumped


def test_a_slow_query_is_stopped_at_the_time_cap(database: Path):
    db = ReadOnlyDatabase(database, QueryLimits(timeout=0.2))
    endless = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
    )
    with pytest.raises(QueryRefused, match=r"stopped after 0.2 s"):
        db.query(endless)


@pytest.mark.parametrize(
    ("sql", "needs"),
    [
        ("DELETE FROM hosts", "DELETE"),
        ("UPDATE hosts SET name = 'x'", "UPDATE"),
        ("INSERT INTO hosts VALUES (9, 'evil', 'x')", "INSERT"),
        ("DROP TABLE cpu", "DELETE sqlite_master"),
        ("ATTACH DATABASE '{other}' AS other", "ATTACH"),
        ("VACUUM INTO '{other}'", "ATTACH"),
        ("PRAGMA query_only = OFF", "PRAGMA"),
        ("PRAGMA journal_mode = WAL", "PRAGMA"),
        ("CREATE TEMP TABLE scratch (a)", "INSERT"),
        ("SELECT load_extension('/tmp/evil.so')", "FUNCTION load_extension"),
        ("BEGIN IMMEDIATE", "TRANSACTION"),
    ],
)
def test_anything_but_reading_is_refused_and_changes_nothing(
    database: Path, tmp_path: Path, sql: str, needs: str
):
    before = digest(database)
    other = tmp_path / "other.db"
    db = ReadOnlyDatabase(database, QueryLimits())
    with pytest.raises(QueryRefused) as refused:
        db.query(sql.format(other=other))
    assert "only reads" in str(refused.value) and needs in str(refused.value)
    assert digest(database) == before
    assert not other.exists()


def test_two_statements_and_empty_sql_get_clear_errors(database: Path):
    db = ReadOnlyDatabase(database, QueryLimits())
    with pytest.raises(QueryRefused, match="one statement at a time"):
        db.query("SELECT 1; DELETE FROM hosts")
    with pytest.raises(QueryRefused, match="empty"):
        db.query("  ")
    with pytest.raises(QueryRefused, match="no such table: nope"):
        db.query("SELECT * FROM nope")


def test_the_schema_can_be_read(database: Path):
    db = ReadOnlyDatabase(database, QueryLimits())
    result = db.query("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
    assert result.rows == [["cpu"], ["hosts"]]
