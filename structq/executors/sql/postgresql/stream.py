"""PostgreSQL results read in chunks, so that a long result is held once, as its Python rows.

psycopg's ordinary cursor keeps the whole result in libpq's
memory while it makes the Python rows from it: a million text codes held ~30 MiB there on top
of the ~115 MiB of rows. With libpq 17 or later the server's rows arrive in chunks of
``CHUNK_ROWS`` (``Cursor.stream`` in chunked-rows mode) and each chunk is freed once its rows
are made; reading them was no slower (a million codes, under load: 0.49–0.51 s against
0.69–0.89 s). Older libpq
(or psycopg before 3.2) has no chunked mode, and the result is read through SQLAlchemy as before.

The statement is the one SQLAlchemy would send (the ``text()`` clause compiled for psycopg,
parameters by name); a driver error is raised as SQLAlchemy's ``DBAPIError``, as it would be
from ``Connection.execute``, so the executor tells timeouts, lost servers and rejected
queries apart the same way.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from ..fetch import NotAQuery, Read, Statement

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = ["CHUNK_ROWS", "chunked_rows", "read_chunked"]

#: Rows per chunk: enough that a chunk's round of work outweighs its fixed cost, few enough
#: that a chunk's result is small next to the rows.
CHUNK_ROWS = 10_000


def read_chunked(connection: "Connection", statement: Statement, size: int) -> Read | None:
    """At most ``size`` rows of ``statement``: (column names, the DB-API ``description``, the
    rows as tuples); None when it cannot be read in chunks here (``chunked_rows``, a
    parameter SQLAlchemy would expand or convert), and ``fetch`` reads it as before."""
    from psycopg import Error, ProgrammingError
    from psycopg.rows import tuple_row

    if not chunked_rows():
        return None
    clause, params = statement
    dialect = connection.dialect
    compiled = clause.compile(dialect=dialect)
    if any(bind.expanding or bind.type.bind_processor(dialect) is not None for bind in compiled.binds.values()):
        return None
    sql, values = compiled.string, compiled.construct_params(params)
    dbapi_connection = connection.connection.dbapi_connection
    cursor = dbapi_connection.cursor(row_factory=tuple_row)
    try:
        stream = cursor.stream(sql, values, size=min(size, CHUNK_ROWS))
        try:
            rows = list(itertools.islice(stream, size))
        finally:
            stream.close()  # rows left over: psycopg cancels the statement
        description = cursor.description
        # No rows came, nor the columns with them: the server still has them.
        columns = tuple(c.name for c in description) if description else _columns_of_unnamed(dbapi_connection)
    except ProgrammingError as exc:
        if getattr(exc, "sqlstate", None) is None and type(exc) is ProgrammingError:
            raise NotAQuery() from None  # "the operation in stream() didn't produce a result"
        raise _dbapi_error(connection, cursor, sql, values, exc) from exc
    except Error as exc:
        raise _dbapi_error(connection, cursor, sql, values, exc) from exc
    finally:
        cursor.close()
    return columns, description, rows


def chunked_rows() -> bool:
    """Whether psycopg (3.2 or later) and its libpq (17 or later) can read rows in chunks."""
    import psycopg

    capabilities = getattr(psycopg, "capabilities", None)
    return capabilities is not None and capabilities.has_stream_chunked()


def _columns_of_unnamed(dbapi_connection: Any) -> tuple[str, ...]:
    """The result columns of the statement just run: the server keeps it, parsed, as the
    unnamed statement until the next one (``Cursor.stream`` sends it unprepared)."""
    described = dbapi_connection.pgconn.describe_prepared(b"")
    encoding = dbapi_connection.info.encoding
    return tuple(described.fname(i).decode(encoding) for i in range(described.nfields))


def _dbapi_error(connection: "Connection", cursor: Any, sql: str, values: Any, error: Exception) -> Exception:
    """``error`` as SQLAlchemy would raise it from ``execute``, the connection invalidated when
    the error says it is lost."""
    from psycopg import Error
    from sqlalchemy.exc import DBAPIError

    dbapi_connection = connection.connection.dbapi_connection
    lost = connection.dialect.is_disconnect(error, dbapi_connection, cursor)
    if lost:
        connection.invalidate(error)
    return DBAPIError.instance(sql, values, error, Error, connection_invalidated=lost, dialect=connection.dialect)
