"""Hostile statements the sandbox accepts, run for real: they must change nothing.

The property test (``test_sandbox_corpora.py``) checks the accepted queries' shape; this runs
them. Each database holds a copy of the hostile test tables (created through the admin URL),
and every accepted statement of that database's dialect runs as a SELECT-only user (SQLite:
the file opened ``mode=ro``), through ``sqlalchemy.text()`` with the SafeQuery's params,
inside a read-only transaction with a 2-second statement timeout, fetching at most
``SafeQuery.limit`` rows. Errors raised by the database are fine and only counted; what must
hold is that a checksum (md5 of every table's rows in order, plus the list of tables) is the
same before and after.

All accepted statements run (a few hundred at most, each bounded by the timeout). Should the
corpus grow past ``MAX_STATEMENTS_PER_ENGINE``, a deterministic sample (ordered by the SQL's
sha1) keeps each database under a minute.
"""

from __future__ import annotations

import abc
import hashlib
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from corpora import HOSTILE_ROWS, HOSTILE_SCHEMA, HostileStatement, hostile_outcomes
from servers import MariaDBServer, PostgresServer
from structq.executors.sql import limit_sqlite
from structq.safety import SafeQuery

TIMEOUT_S = 2
NOT_SENT = "not sent"
MAX_STATEMENTS_PER_ENGINE = 2000
DATABASE = "sandbox_hostile_exec"
READER, READER_PASSWORD = "hostile_reader", "r3ad-only"

_COLUMN_TYPES: dict[str, type[sa.types.TypeEngine[Any]]] = {
    "integer": sa.Integer, "text": sa.Text, "real": sa.Float, "date": sa.Date,
}


def hostile_metadata() -> sa.MetaData:
    """The hostile test manifest's tables as SQLAlchemy tables (the manifest is the source)."""
    metadata = sa.MetaData()
    for table, columns in HOSTILE_SCHEMA.items():
        sa.Table(table, metadata, *(sa.Column(name, _COLUMN_TYPES[kind]()) for name, kind in columns))
    return metadata


def load_tables(admin: Engine) -> None:
    metadata = hostile_metadata()
    metadata.create_all(admin)
    with admin.begin() as conn:
        for table in metadata.sorted_tables:
            rows = [dict(zip(table.columns.keys(), row)) for row in HOSTILE_ROWS[table.name]]
            conn.execute(table.insert(), rows)


def database_checksum(admin: Engine) -> str:
    """md5 over the list of tables and every table's rows in a fixed order."""
    digest = hashlib.md5()
    digest.update(repr(sorted(sa.inspect(admin).get_table_names())).encode())
    with admin.connect() as conn:
        for table in hostile_metadata().sorted_tables:
            for row in conn.execute(sa.select(table).order_by(*table.columns)):
                digest.update(repr(tuple(row)).encode())
    return digest.hexdigest()


def accepted_statements(root: Path, dialect: str) -> list[tuple[HostileStatement, SafeQuery]]:
    """What the sandbox accepts in ``dialect``, sampled deterministically past the cap."""
    accepted = [(s, o) for s, o in hostile_outcomes(root, (dialect,)) if isinstance(o, SafeQuery)]
    if len(accepted) > MAX_STATEMENTS_PER_ENGINE:
        accepted.sort(key=lambda pair: hashlib.sha1(pair[0].sql.encode()).hexdigest())
        accepted = accepted[:MAX_STATEMENTS_PER_ENGINE]
    return accepted


def bound_text(safe: SafeQuery) -> sa.TextClause:
    """The SafeQuery as it is meant to run: ``text()`` with list parameters expanded."""
    clause = sa.text(safe.text or "")
    expanding = [sa.bindparam(name, expanding=True) for name in safe.expanding]
    return clause.bindparams(*expanding) if expanding else clause


# ============================================================================================
# One target per database: how to reach it read-only, and how to bound a statement's time
# ============================================================================================


class Target(abc.ABC):
    """A database holding the hostile tables: an admin pool and a read-only one."""

    dialect: str
    admin: Engine
    reader: Engine
    #: A read-only statement that runs far longer than the timeout, to show the timeout works.
    slow_sql: str

    @abc.abstractmethod
    def _begin_read_only(self, conn: Connection) -> None:
        """Start a read-only transaction on ``conn`` with the statement timeout set."""

    @abc.abstractmethod
    def is_timeout(self, error: sa.exc.DBAPIError) -> bool:
        """Whether the database cancelled the statement for running past the timeout."""

    @contextmanager
    def read_only(self) -> Iterator[Connection]:
        """A read-only transaction that is always rolled back."""
        with self.reader.connect() as conn:
            self._begin_read_only(conn)
            try:
                yield conn
            finally:
                conn.rollback()

    def dispose(self) -> None:
        self.reader.dispose()
        self.admin.dispose()


class SQLiteTarget(Target):
    """A file opened ``mode=ro``; a progress handler interrupts statements past the deadline."""

    dialect = "sqlite"
    slow_sql = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"

    def __init__(self, path: Path) -> None:
        self.admin = sa.create_engine(f"sqlite:///{path}")
        load_tables(self.admin)
        self.reader = sa.create_engine(f"sqlite:///file:{path}?mode=ro&uri=true")
        self._deadline = 0.0
        sa.event.listen(self.reader, "connect", self._install_progress_handler)

    def _install_progress_handler(self, dbapi_connection: sqlite3.Connection, _record: object) -> None:
        limit_sqlite(dbapi_connection)  # the executor's value, pattern and REGEXP (RE2) limits
        dbapi_connection.set_progress_handler(lambda: int(time.monotonic() > self._deadline), 10_000)

    def _begin_read_only(self, conn: Connection) -> None:
        self._deadline = time.monotonic() + TIMEOUT_S

    def is_timeout(self, error: sa.exc.DBAPIError) -> bool:
        return "interrupted" in str(error.orig)


class ServerTarget(Target):
    """A database of its own on a session server: tables loaded as admin, read as a SELECT-only
    user."""

    def __init__(self, server: PostgresServer | MariaDBServer) -> None:
        self.admin = sa.create_engine(server.create_database(DATABASE))
        load_tables(self.admin)
        self.reader = sa.create_engine(server.create_readonly_user(DATABASE, READER, READER_PASSWORD))


class PostgresTarget(ServerTarget):
    """A SELECT-only role; ``SET TRANSACTION READ ONLY`` and ``SET LOCAL statement_timeout``."""

    dialect = "postgres"
    slow_sql = "SELECT pg_sleep(30)"

    def _begin_read_only(self, conn: Connection) -> None:
        conn.exec_driver_sql("SET TRANSACTION READ ONLY")
        conn.exec_driver_sql(f"SET LOCAL statement_timeout = '{TIMEOUT_S}s'")

    def is_timeout(self, error: sa.exc.DBAPIError) -> bool:
        return type(error.orig).__name__ == "QueryCanceled"


class MariaDBTarget(ServerTarget):
    """A SELECT-only user; ``max_statement_time`` for the session, ``START TRANSACTION READ ONLY``."""

    dialect = "mysql"
    slow_sql = "SELECT SLEEP(30)"

    def _begin_read_only(self, conn: Connection) -> None:
        conn.exec_driver_sql(f"SET SESSION max_statement_time = {TIMEOUT_S}")
        conn.exec_driver_sql("START TRANSACTION READ ONLY")

    def is_timeout(self, error: sa.exc.DBAPIError) -> bool:
        return getattr(error.orig, "args", (None,))[0] == 1969  # ER_STATEMENT_TIMEOUT


# ============================================================================================
# The behaviour every database must show
# ============================================================================================


def run_one(target: Target, safe: SafeQuery) -> str:
    """Run one accepted query read-only; the outcome's name for the tally."""
    try:
        with target.read_only() as conn:
            conn.execute(bound_text(safe), safe.params).fetchmany(safe.limit)
    except sa.exc.DBAPIError as error:
        return "timeout" if target.is_timeout(error) else "database error"
    except sa.exc.StatementError:  # SQLAlchemy could not send it: text and params disagree
        return NOT_SENT
    return "ran"


def assert_reader_cannot_write(target: Target) -> None:
    """A control: the read-only path must itself refuse a write, or "nothing changed" proves
    little about it. (The sandbox never sees this statement.)"""
    with pytest.raises(sa.exc.DBAPIError):
        with target.read_only() as conn:
            conn.execute(sa.text("DELETE FROM users"))


def assert_timeout_fires(target: Target) -> None:
    """A control: a slow statement is cancelled by the timeout, so no accepted one can hang."""
    outcome = run_one(target, SafeQuery(source="control", kind="sql", limit=2, max_rows=1, text=target.slow_sql))
    assert outcome == "timeout", outcome


def exercise(target: Target, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_reader_cannot_write(target)
    assert_timeout_fires(target)
    statements = accepted_statements(root, target.dialect)
    before = database_checksum(target.admin)
    started = time.monotonic()
    outcomes: Counter[str] = Counter()
    changed_by: list[str] = []
    unsendable: list[str] = []
    for statement, safe in statements:
        outcome = run_one(target, safe)
        outcomes[outcome] += 1
        if outcome == NOT_SENT:
            unsendable.append(f"{statement.origin}: {safe.text} params={safe.params}")
        if database_checksum(target.admin) != before:
            changed_by.append(f"{statement.origin}: {statement.sql}\n    ran as: {safe.text}")
            before = database_checksum(target.admin)
    elapsed = time.monotonic() - started
    with capsys.disabled():
        summary = ", ".join(f"{name} {n}" for name, n in outcomes.most_common()) or "nothing accepted"
        print(f"\n  {target.dialect}: {len(statements)} accepted hostile statements in {elapsed:.1f}s: {summary}")
    assert not changed_by, "accepted statements changed the database:\n" + "\n".join(changed_by)
    assert not unsendable, (
        "SafeQuery text that sqlalchemy.text() cannot send with its params (a literal ':name' "
        "taken for a placeholder, or a placeholder without a value):\n" + "\n".join(unsendable)
    )


def exercise_then_dispose(target, corpora: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``exercise`` one database, releasing its connections whatever happens."""
    try:
        exercise(target, corpora, capsys)
    finally:
        target.dispose()


def test_accepted_hostile_statements_change_nothing_on_sqlite(
    shared_corpora: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exercise_then_dispose(SQLiteTarget(tmp_path / "hostile.db"), shared_corpora, capsys)


def test_accepted_hostile_statements_change_nothing_on_postgres(
    shared_corpora: Path, pg_server: PostgresServer, capsys: pytest.CaptureFixture[str]
) -> None:
    exercise_then_dispose(PostgresTarget(pg_server), shared_corpora, capsys)


def test_accepted_hostile_statements_change_nothing_on_mariadb(
    shared_corpora: Path, mariadb_server: MariaDBServer, capsys: pytest.CaptureFixture[str]
) -> None:
    exercise_then_dispose(MariaDBTarget(mariadb_server), shared_corpora, capsys)
