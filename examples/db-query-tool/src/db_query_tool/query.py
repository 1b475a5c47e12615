"""Read-only SQL over a SQLite file: one parameterised SELECT at a time, row and time caps.

Three locks, each enough alone against writes: the file is opened with `mode=ro`, the
connection has `PRAGMA query_only`, and an authorizer allows nothing but reading (SELECT,
reading columns, calling functions other than load_extension, recursive CTEs) — so ATTACH,
PRAGMA, temporary tables and VACUUM INTO are refused before they run.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ALLOWED_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
FORBIDDEN_FUNCTIONS = frozenset({"load_extension"})
_ACTION_NAMES = {
    getattr(sqlite3, name): name.removeprefix("SQLITE_").replace("_", " ")
    for name in (
        "SQLITE_INSERT SQLITE_UPDATE SQLITE_DELETE SQLITE_PRAGMA SQLITE_ATTACH SQLITE_DETACH "
        "SQLITE_TRANSACTION SQLITE_SAVEPOINT SQLITE_ALTER_TABLE SQLITE_REINDEX SQLITE_ANALYZE "
        "SQLITE_CREATE_TABLE SQLITE_CREATE_TEMP_TABLE SQLITE_CREATE_INDEX SQLITE_CREATE_VIEW "
        "SQLITE_CREATE_TRIGGER SQLITE_CREATE_VTABLE SQLITE_DROP_TABLE SQLITE_DROP_INDEX "
        "SQLITE_DROP_VIEW SQLITE_DROP_TRIGGER SQLITE_DROP_VTABLE SQLITE_FUNCTION"
    ).split()
}
PROGRESS_STEPS = 1_000  # virtual machine steps between two looks at the clock


class QueryRefused(Exception):
    """The query was not run, or was stopped; the message says why, for the model."""


@dataclass(frozen=True)
class QueryLimits:
    max_rows: int = 200
    timeout: float = 5.0
    max_cell_chars: int = 2_000


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool  # more rows than max_rows matched
    elapsed_ms: float


class ReadOnlyDatabase:
    """A SQLite file opened read-only for each query (in the calling thread)."""

    def __init__(self, path: Path, limits: QueryLimits):
        self.path = path
        self.limits = limits

    def query(self, sql: str, params: list[Any] | None = None) -> QueryResult:
        """Runs one SELECT with `?` parameters; QueryRefused for anything else or too slow."""
        if not sql.strip():
            raise QueryRefused("the SQL is empty")
        started = time.monotonic()
        refused: list[str] = []
        connection = self._connect(refused, started + self.limits.timeout)
        try:
            cursor = connection.execute(sql, params or [])
            if cursor.description is None:
                raise QueryRefused("only SELECT statements return rows; nothing was run")
            rows = cursor.fetchmany(self.limits.max_rows + 1)
        except sqlite3.Error as exc:
            raise QueryRefused(self._explain(exc, refused)) from exc
        finally:
            connection.close()
        columns = [column[0] for column in cursor.description]
        kept = [[self._cell(value) for value in row] for row in rows[: self.limits.max_rows]]
        elapsed = (time.monotonic() - started) * 1000
        return QueryResult(columns, kept, len(rows) > self.limits.max_rows, elapsed)

    def _connect(self, refused: list[str], deadline: float) -> sqlite3.Connection:
        try:
            connection = sqlite3.connect(f"{self.path.as_uri()}?mode=ro", uri=True, timeout=1.0)
        except sqlite3.Error as exc:
            raise QueryRefused(f"cannot open the database: {exc}") from exc
        connection.execute("PRAGMA query_only = ON")

        def authorize(action: int, arg1: str | None, arg2: str | None, *_: object) -> int:
            if action in ALLOWED_ACTIONS and not (
                action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in FORBIDDEN_FUNCTIONS
            ):
                return sqlite3.SQLITE_OK
            what = _ACTION_NAMES.get(action, f"action {action}")
            refused.append(f"{what} {arg2 or arg1 or ''}".strip())
            return sqlite3.SQLITE_DENY

        connection.set_authorizer(authorize)
        connection.set_progress_handler(lambda: int(time.monotonic() > deadline), PROGRESS_STEPS)
        return connection

    def _explain(self, exc: sqlite3.Error, refused: list[str]) -> str:
        if refused:
            return (
                f"refused: this tool only reads (SELECT); the query needs {refused[0]}. "
                "Nothing was changed."
            )
        if "interrupted" in str(exc):
            return f"stopped after {self.limits.timeout:g} s; narrow the query (WHERE, LIMIT)"
        if isinstance(exc, sqlite3.ProgrammingError) and "one statement" in str(exc):
            return "send one statement at a time (no `;` between statements)"
        return f"SQLite says: {exc}"

    def _cell(self, value: Any) -> Any:
        if isinstance(value, bytes):
            return f"<{len(value)} bytes>"
        if isinstance(value, str) and len(value) > self.limits.max_cell_chars:
            cut = len(value) - self.limits.max_cell_chars
            return f"{value[: self.limits.max_cell_chars]}[... {cut} more characters]"
        return value
