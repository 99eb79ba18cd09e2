"""PostgreSQL (psycopg 3): read-only sessions and transactions, ``statement_timeout``, and a
server-side cancel as the backstop; lists of ints bound as ready-made array text.

Why a reference list stays ``col = ANY(:array)`` (the sandbox's form, ``references.py``),
measured on PostgreSQL 15 with 100k ids against 120k rows (``bench/engine.py`` (b); the JOIN
that asks the same takes ~70-90 ms here):

- ``= ANY(:array)``: the array is a constant to the planner, so execution hashes it (one
  probe per row: ~45 ms). Planning estimates the selectivity of every element (35-140 ms for
  100k, the largest part of the step); a parameter the planner cannot see would save that
  but lose the hashing — a linear search per row, over a minute per query at this size.
- ``IN (SELECT unnest(CAST(:array AS int[])))`` (and ``= ANY(SELECT unnest(…))``, ``EXISTS``):
  planning is instant, but the planner guesses 200 distinct values for ``unnest`` and picks a
  nested loop of 100k index probes: 450-650 ms, 5-7× the JOIN. With nested loops disabled it
  hashes an aggregate sized for 200 rows that spills to disk: no better.
- ``= ANY(ARRAY(SELECT unnest(…)))``: instant planning, but the array becomes a run-time
  parameter, never hashed: a bitmap index scan where an index exists (~230 ms), else a
  linear search per row.
- a temporary table filled with ``COPY``: not allowed — every transaction here is
  ``READ ONLY``, which refuses ``CREATE`` (temporary tables included) and ``COPY FROM``.

So the form stays, and what the client adds is kept small: a list of plain ints goes as array
text written from the list's ``repr`` (``pg_int_array``), typed as psycopg would type it.
Every other list (text, dates as ISO text, NULLs, mixed) is adapted by psycopg: the server
compares with the column's type, and results equal the subquery's (``tests/test_references_postgres.py``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, ClassVar

from .fetch import Statement, bind
from .guards import Backend, Setup, connect_timeout, milliseconds

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Connection

    from structq.safety.query import SafeQuery

__all__ = ["PostgresBackend", "pg_int_array"]


#: The array types psycopg gives a list of ints, by the largest magnitude (int2, int4, int8).
_PG_INT_ARRAYS = ((2**15, 1005), (2**31, 1007), (2**63, 1016))


class _PgIntArray:
    """A list of ints already written as PostgreSQL array text (``{1,2,3}``)."""

    __slots__ = ("text",)
    oid: ClassVar[int]

    def __init__(self, text: bytes) -> None:
        self.text = text


@functools.cache
def _pg_array_classes() -> dict[int, type[_PgIntArray]]:
    return {oid: type(f"_PgIntArray{oid}", (_PgIntArray,), {"__slots__": (), "oid": oid})
            for _, oid in _PG_INT_ARRAYS}


@functools.cache
def _pg_array_dumpers() -> dict[type[_PgIntArray], type]:
    from psycopg.adapt import Dumper

    def dumper(array_class: type[_PgIntArray]) -> type:
        def dump(self: Any, obj: _PgIntArray) -> bytes:
            return obj.text

        return type(f"{array_class.__name__}Dumper", (Dumper,), {"oid": array_class.oid, "dump": dump})

    return {array_class: dumper(array_class) for array_class in _pg_array_classes().values()}


def pg_int_array(values: list[Any]) -> _PgIntArray | None:
    """``values`` as array text when all are exact ints within 64 bits, else None."""
    if not values or set(map(type, values)) != {int}:
        return None
    magnitude = max(-min(values), max(values) + 1)  # int2 holds -2**15 … 2**15 - 1
    for bound, oid in _PG_INT_ARRAYS:
        if magnitude <= bound:
            # The list's repr, "[1, 2, 3]", is written in C: three times faster than joining
            # str() of each int (100k ids: ~9 ms instead of ~28 ms).
            return _pg_array_classes()[oid](("{" + repr(values)[1:-1].replace(" ", "") + "}").encode("ascii"))
    return None


def _pg_registered(dbapi_connection: Any, array_class: type) -> bool:
    """Whether the connection dumps ``array_class`` with our dumper (set by ``on_connect``)."""
    from psycopg.adapt import PyFormat

    try:
        dumper = dbapi_connection.adapters.get_dumper(array_class, PyFormat.AUTO)
    except Exception:  # noqa: BLE001 - psycopg raises ProgrammingError when none is registered
        return False
    return dumper is _pg_array_dumpers().get(array_class)


class PostgresBackend(Backend):
    label = "PostgreSQL"
    drivername = "postgresql+psycopg"
    driver_module = "psycopg"
    extra = "postgres"
    cancel_kind = "postgres"

    #: query_canceled: statement_timeout, or our backstop's cancel.
    _TIMEOUT_STATES = frozenset({"57014"})
    #: connection exceptions, shutting down, too many connections, authentication.
    _UNAVAILABLE_CLASSES = ("08", "28", "57P", "53300")

    def engine_arguments(self, url: "URL", timeout_s: float) -> tuple["URL", dict[str, Any]]:
        options = " ".join(filter(None, [url.query.get("options"), "-c default_transaction_read_only=on"]))
        connect_args = {
            "connect_timeout": round(connect_timeout(timeout_s)),
            # Every statement goes through the extended protocol, which takes one statement
            # only: "SELECT 1; COMMIT; DELETE …" fails instead of escaping the transaction.
            "prepare_threshold": 0,
            "options": options,
            "application_name": url.query.get("application_name", "structq"),
        }
        return url.difference_update_query(["options"]), {"connect_args": connect_args}

    def on_connect(self, dbapi_connection: Any) -> None:
        for array_class, dumper in _pg_array_dumpers().items():
            dbapi_connection.adapters.register_dumper(array_class, dumper)

    def statement(self, dbapi_connection: Any, query: "SafeQuery") -> Statement:
        """Lists of plain ints (``= ANY(:ref)``) bound as ready-made array text.

        psycopg adapts a list of 100k ints in ~60 ms (it dumps every element through the
        dumper machinery); joining their decimal text takes ~10 ms. The array gets the type
        psycopg itself would give it (``int2[]``, ``int4[]`` or ``int8[]`` by the largest
        magnitude), so the server sees the same parameter type either way. Any other list
        (NULLs, bools, text, numbers past 64 bits) is left to psycopg.
        """
        params = dict(query.params)
        for name, value in params.items():
            if type(value) is list:
                array = pg_int_array(value)
                if array is not None and _pg_registered(dbapi_connection, type(array)):
                    params[name] = array
        return bind(query), params

    def setup(self, connection: "Connection", timeout_s: float) -> list[Setup]:
        return [
            Setup("SET TRANSACTION READ ONLY"),
            Setup("SELECT set_config('statement_timeout', :ms, true)", {"ms": str(milliseconds(timeout_s))}),
        ]

    def pin_schema(self, schema: str) -> list[Setup]:
        """``search_path`` for this transaction only: the catalog's built-in functions first
        (as PostgreSQL does implicitly), then the declared schema, temporary objects last —
        nothing from ``public`` or a schema named after the user."""
        path = 'pg_catalog, "' + schema.replace('"', '""') + '", pg_temp'
        return [Setup("SELECT set_config('search_path', :path, true)", {"path": path})]

    def is_timeout(self, error: BaseException) -> bool:
        return getattr(error, "sqlstate", None) in self._TIMEOUT_STATES

    def is_unavailable(self, error: BaseException) -> bool:
        state = getattr(error, "sqlstate", None) or ""
        return bool(state) and state.startswith(self._UNAVAILABLE_CLASSES)
