"""What the server infers for a statement's list parameters, and how large its tables are,
in one pipelined round trip that runs nothing.

The backend (``__init__.py``) says why a list is typed as the value it is
compared with and when a long list's switch is set; this module asks the server both facts.
"""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = ["describe"]

_SAVEPOINT = b"structq_list_types"
_BIND = re.compile(r"%%|%\((\w+)\)s")


@functools.lru_cache(maxsize=256)
def _numbered(text: str) -> tuple[str, dict[str, int]]:
    """``text`` (a ``text()`` clause) as the server receives it, ``$1``, ``$2`` … for its
    parameters (SQLAlchemy writes ``%(name)s`` and ``%%``, psycopg numbers them), and each
    parameter's position."""
    from sqlalchemy import text as text_clause
    from sqlalchemy.dialects.postgresql.psycopg import dialect

    positions: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return "%"
        return "$" + str(positions.setdefault(match.group(1), len(positions) + 1))

    compiled = str(text_clause(text).compile(dialect=dialect()))
    return _BIND.sub(number, compiled), positions


def _rows_query(tables: int) -> bytes:
    """How many of the named tables exist, whether all are plain tables (or materialized views)
    with a row count from ANALYZE or VACUUM, and the largest count."""
    names = ", ".join(f"to_regclass(quote_ident(${i}))" for i in range(1, tables + 1))
    return ("SELECT count(*), bool_and(relkind IN ('r', 'm') AND reltuples >= 0), max(reltuples) "
            f"FROM pg_catalog.pg_class WHERE oid IN ({names})").encode("ascii")


def describe(dbapi_connection: Any, text: str, tables: tuple[str, ...]
              ) -> tuple[dict[str, int], float | None] | None:
    """The array type the server infers for each parameter of ``text`` when none is typed
    (that of the value it is compared with), and the most rows any of ``tables`` holds (None
    when one is not a plain table, was never analyzed or is not found; 0 for no tables).

    One round trip, pipelined, in a savepoint: ``SAVEPOINT``, the row counts, ``Parse`` and
    ``Describe`` of the unnamed statement, ``RELEASE``, ``Sync``. Nothing runs: the statement
    is only parsed. If any of it fails (a wrong column, a cancel) the savepoint is rolled back
    and None returned; the query itself then runs, and fails, as it would have.
    """
    from psycopg import Error, pq

    try:
        pgconn = dbapi_connection.pgconn
        encoding = dbapi_connection.info.encoding
        command, positions = _numbered(text)
    except Exception:  # noqa: BLE001 - not psycopg, or text() refuses the text: bind as before
        return None
    sent = [(b"SAVEPOINT " + _SAVEPOINT, None)]
    if tables:
        sent.append((_rows_query(len(tables)), [table.encode(encoding) for table in tables]))
    results: list[Any] = []
    blocking = pgconn.nonblocking
    try:
        pgconn.nonblocking = 0
        pgconn.enter_pipeline_mode()
        synced = False
        try:
            for sql, values in sent:
                pgconn.send_query_params(sql, values)
            pgconn.send_prepare(b"", command.encode(encoding), [0] * len(positions))
            pgconn.send_describe_prepared(b"")
            pgconn.send_query_params(b"RELEASE SAVEPOINT " + _SAVEPOINT, None)
            pgconn.pipeline_sync()
            synced = True
            results = _until_sync(pgconn, len(sent) + 3)
        finally:
            if synced and len(results) < len(sent) + 3:
                _until_sync(pgconn, len(sent) + 3)  # interrupted: collect what is left
            pgconn.exit_pipeline_mode()
    except Error:
        return None
    finally:
        pgconn.nonblocking = blocking
    ok = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)
    if len(results) != len(sent) + 3 or any(result.status not in ok for result in results):
        if results and results[0].status in ok:  # the savepoint was made: back to it
            try:
                pgconn.exec_(b"ROLLBACK TO SAVEPOINT " + _SAVEPOINT + b"; RELEASE SAVEPOINT " + _SAVEPOINT)
            except Error:
                pass
        return None
    described = results[-2]
    types = {name: described.param_type(position - 1) for name, position in positions.items()}
    rows: float | None = 0.0
    if tables:
        found, plain, largest = (results[1].get_value(0, column) for column in range(3))
        rows = float(largest) if found is not None and int(found) == len(tables) and plain == b"t" else None
    return types, rows


def _until_sync(pgconn: Any, commands: int) -> list[Any]:
    """The results of the pipelined ``commands`` up to the ``Sync`` (a NULL follows each)."""
    from psycopg import pq

    results = []
    for _ in range(2 * commands + 2):
        result = pgconn.get_result()
        if result is None:
            continue
        if result.status == pq.ExecStatus.PIPELINE_SYNC:
            break
        results.append(result)
    return results
