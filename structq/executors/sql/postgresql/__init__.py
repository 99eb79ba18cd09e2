"""PostgreSQL (psycopg 3): read-only sessions and transactions, ``statement_timeout``, and a
server-side cancel as the backstop; reference lists bound as binary arrays of the type they are
compared with, long ones searched through a hash with nothing planned per value.

Measured on PostgreSQL 15 with 100k ids against 120k rows (``bench/engine.py`` (b): the two
steps next to the one JOIN that asks the same, 24-28 ms). The two steps took ~80 ms, 3.2× the
JOIN (step 1 ~26 ms, step 2 ~55 ms, of which ~25 ms planning); now ~48-51 ms, 1.7-1.9×
(~19 ms and ~23 ms). Where the time was, and what each form does:

- ``x = ANY(:array)``: the array is a constant to the planner, so execution hashes it (one
  probe per row: ~12 ms). But planning estimates the selectivity of every element
  (``scalararraysel`` calls ``eqsel`` per element: ``examine_variable``, a statistics lookup,
  the MCV list scanned): 15-45 ms for 100k when the column has no MCV list, 50-200 ms with
  one (10 MCVs), 17-20 ms on a unique column (its shortcut still looks the column up per
  element); no setting a READ ONLY transaction may change skips it. A parameter the planner
  cannot see saves the planning but loses the hashing: a linear search per row, over a minute
  per query at this size.
- The array must be of ``x``'s own type to be hashed (``lefthashfunc == righthashfunc``):
  ``int4 = ANY(int2[])`` and ``int8 = ANY(int4[])``, which psycopg's typing by magnitude gives
  whenever the values are small, compare every row with every element (20k small ids against
  120k unindexed rows: 5-8 s instead of 20 ms). So before binding a list of ints (``HASHED_MIN``
  values or more), or any switched list, the server is asked what type it infers for each list
  parameter left untyped (``describe.py``: Parse and Describe in a savepoint, pipelined with the
  table sizes, one round trip, ~0.1 ms), and the ints go as that type (``pg_int_array``); a
  list of text is sent untyped by psycopg and gets that type anyway. Typed like the column,
  the planner prices the hashed scan right and may now prefer it to an index where the two
  cost about the same, on small tables (1,000 ids here: a 7 ms hashed scan, where the
  cross-typed list, priced as 1,000 comparisons a row, got a 3 ms bitmap scan); without an
  index the cross-typed list took seconds.
- ``CASE (x = ANY(:array)) WHEN TRUE THEN TRUE WHEN FALSE THEN FALSE END``: the same value,
  but the planner sees no ``= ANY`` clause, so it estimates nothing per element (0.07 ms),
  guesses half the rows, can use no index, and execution still hashes the array (~12.4 ms).
  The sandbox writes a long list as both, behind a boolean switch the planner folds away
  before planning (``references._switch``); ``statement`` sets it when the list will be hashed
  and every table read is a plain, analyzed table of at most ``ROWS_PER_VALUE`` rows per value.
  Then a scan is what the planner would pick or close to it; past that an index can win
  (10k ids against 5M indexed rows: plain bitmap scan 31 ms, hashed scan 280 ms; 100k ids
  against 5M: both scan, ~375 ms), so the plain form stays.
- ``IN (SELECT unnest(:array))`` (a semi-join): the planner takes the array's length as the
  rows of ``unnest`` (a Const), but estimates 200 distinct values when it makes them unique,
  so it picks 100k index probes in a nested loop: 150-650 ms. ``IN (SELECT DISTINCT unnest(…))``
  gets the right estimate and a hash join, after a hash aggregate that spills to disk: ~62 ms.
  As a subplan (``NOT NOT (x IN (SELECT unnest(…)))``, not pulled up) it is hashed: ~29 ms.
  ``= ANY(ARRAY(SELECT unnest(…)))``: a run-time parameter, never hashed.
- Parallel workers: a parallel plan reaches each worker written out as text and read back,
  the array constant included, and each worker hashes the whole array again. With a million
  codes (~10 MB of array) the statement took 1.7-2.0 s with two workers against ~1.0 s alone
  (100k: 0.85 s against 0.73 s; 30k: even; 10k: workers win, 0.19 s against 0.26 s). So a
  statement whose switch is set for ``SERIAL_LIST_MIN`` values or more runs ``serial``: the
  switch already says the tables are small for the list, so a shared scan saves less than
  shipping the list costs. A plain ``= ANY`` (large tables) keeps its workers. Alone, the
  million-code statement is about a JOIN on ``unnest(:array)`` (1.34 s against 1.37 s under
  the same load), which would also repeat rows for repeated values; the array sent in binary
  by psycopg's own dumper took 2.9 s where the literal took 2.0 s (its dumping is per value).
- A temporary table filled with ``COPY``: not allowed — every transaction here is ``READ
  ONLY``, which refuses ``CREATE`` (temporary tables included) and ``COPY FROM``.
- Sending: a binary array is written from ``array`` slices in C (100k ints ~1.5 ms; their text
  from the list's repr took ~8 ms) and read by the server faster than text, though larger
  (8 bytes an int4 against ~7): 2.5 ms a round trip instead of 4. Sorting or deduplicating
  the list first would not help the hash (duplicates only meet their entry again); nothing is
  estimated per element any more where it would have.
- Reading step 1's 100k rows: ~9 ms of server work and transfer, ~9 ms for psycopg to make the
  tuples (binary results would save ~1 ms); checking every value JSON-safe took another 5 ms,
  which ``plain_columns`` skips for columns psycopg loads as ``int``, ``str`` or ``bool``. Rows
  are read in chunks (``stream.py``), so libpq never holds a whole long result beside them.

Every statement is prepared (``prepare_threshold=0``) and psycopg deallocates its prepared
statements at each rollback, so every execution is planned with its own values: a custom
plan, in which the array is a constant and the switch is folded. Every other list (floats,
NULLs only, mixed) is adapted by psycopg as before. Results equal the subquery's, with either
switch value and against every integer width (``tests/test_references_postgres.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..fetch import Read, Statement, bind
from ..guards import Backend, Setup, connect_timeout, milliseconds
from .arrays import (HASHABLE_ARRAYS, TEXT_KINDS, PgTextArray, int_array, pg_int_array, register_dumpers,
                        registered, text_array)
from .describe import describe
from .stream import read_chunked

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sqlalchemy.engine import URL, Connection

    from structq.safety.query import SafeQuery

__all__ = ["ROW_SETTING_PREFIX", "SERIAL_LIST_MIN", "PostgresBackend", "pg_int_array", "serial", "setting_text"]


#: PostgreSQL hashes an ``= ANY`` array of at least this many elements (MIN_ARRAY_SIZE_FOR_HASHED_SAOP);
#: for a shorter one the element type does not matter.
HASHED_MIN = 9
#: A switched list (``references.py``) is searched through its hash when no table the query
#: reads holds more than this many rows per value (then a scan costs about what ``= ANY``'s
#: planning would, and an index could not win by much).
ROWS_PER_VALUE = 25
#: A statement whose switch is set for a list of at least this many values runs without
#: parallel workers (``serial``): each worker would receive the list inside the plan.
SERIAL_LIST_MIN = 50_000

#: Row-filter variables reach row-level security policies as settings of this prefix.
ROW_SETTING_PREFIX = "structq."


def setting_text(value: Any) -> str | None:
    """A variable's value as the text ``set_config`` takes and a policy casts back (``true``,
    ``42``, ``2024-05-01``, ``acme``); None for a list or a null, which have no one form."""
    if value is None or isinstance(value, (list, tuple, set, dict)):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    isoformat = getattr(value, "isoformat", None)
    return isoformat() if callable(isoformat) else str(value)


#: Result column types psycopg's default loaders give as ``int``, ``str`` or ``bool``, which
#: are JSON-safe as they are: bool, name, int8, int2, int4, text, oid, bpchar, varchar.
_PLAIN_COLUMNS = frozenset({16, 19, 20, 21, 23, 25, 26, 1042, 1043})


def serial(dbapi_connection: Any) -> None:
    """No parallel workers for the rest of this transaction (``set_config``'s ``is_local``:
    the rollback at its end forgets it): each worker would receive, and hash, the whole list
    (the module's notes, "Parallel workers")."""
    dbapi_connection.execute("SELECT set_config('max_parallel_workers_per_gather', '0', true)")


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
        register_dumpers(dbapi_connection)

    def statement(self, dbapi_connection: Any, query: "SafeQuery") -> Statement:
        """Lists bound as arrays of the type of the value they are compared with, and each
        switch (``SafeQuery.switches``) set to search its list through a hash when that is safe.

        PostgreSQL hashes ``x = ANY(array)`` only when the array's element type is exactly
        ``x``'s: ``int4 = ANY(int2[])`` or ``int8 = ANY(int4[])`` compares every row with every
        element. So when a list of ints could be hashed (``HASHED_MIN`` values or more) or is
        switched, the server is asked once what type it infers for each list parameter
        (``describe.describe``), and the ints go as that type (``pg_int_array``). Lists of text
        (dates included) go untyped and get the inferred type on their own, written as one
        array literal (``text_array``); other lists are adapted by psycopg as before.

        A switch is set when its list will be hashed (its type is the inferred one, and that
        type's ``=`` hashes) and no table the query reads holds more than ``ROWS_PER_VALUE``
        rows per value. Every other way, the plain ``= ANY`` runs: the same rows either way.
        A statement with a switch set for ``SERIAL_LIST_MIN`` values or more runs ``serial``.
        """
        params = dict(query.params)
        lists = {name: value for name, value in params.items() if type(value) is list}
        if not lists:
            return bind(query), params
        switches = {name: switch for switch, name in query.switches.items()}
        can_pack = registered(dbapi_connection)
        texts = {name: text_array(value) for name, value in lists.items()} \
            if can_pack and registered(dbapi_connection, PgTextArray) else {}
        kinds = {name: set(map(type, value)) for name, value in lists.items() if texts.get(name) is None}
        wanted = can_pack and any(name in switches or (len(value) >= HASHED_MIN and int in kinds.get(name, ()))
                                    for name, value in lists.items())
        described = describe(dbapi_connection, query.text or "", query.tables if switches else ()) \
            if wanted else None
        inferred, rows = described if described is not None else ({}, None)
        long_list_hashed = False  # a switch set for SERIAL_LIST_MIN values or more: run serial
        for name, value in lists.items():
            like = inferred.get(name)
            written = texts.get(name)
            array_value = int_array(value, kinds[name], like) if can_pack and written is None else None
            if written is not None:  # untyped text: the server gives it the inferred type
                params[name] = written
                hashed = like in HASHABLE_ARRAYS
            elif array_value is not None:
                params[name] = array_value
                hashed = array_value.oid == like
            else:  # adapted by psycopg; a list of text (NULLs among it) still gets the inferred type
                hashed = like in HASHABLE_ARRAYS and str in kinds[name] and kinds[name] <= TEXT_KINDS
            if name in switches:
                switched = bool(hashed and rows is not None and rows <= ROWS_PER_VALUE * len(value))
                params[switches[name]] = switched
                long_list_hashed = long_list_hashed or (switched and len(value) >= SERIAL_LIST_MIN)
        if long_list_hashed:
            serial(dbapi_connection)
        return bind(query), params

    def read(self, connection: "Connection", statement: Statement, size: int) -> Read | None:
        """The rows in chunks (``stream.py``): held once, as Python rows, however many."""
        return read_chunked(connection, statement, size)

    def plain_columns(self, description: Any) -> bool:
        """Columns of types psycopg loads as ``int``, ``str`` or ``bool`` (``_PLAIN_COLUMNS``)."""
        return description is not None and all(column.type_code in _PLAIN_COLUMNS for column in description)

    def setup(self, connection: "Connection", timeout_s: float) -> list[Setup]:
        return [
            Setup("SET TRANSACTION READ ONLY"),
            Setup("SELECT set_config('statement_timeout', :ms, true)", {"ms": str(milliseconds(timeout_s))}),
        ]

    def row_settings(self, variables: "Mapping[str, Any]") -> list[Setup]:
        """``structq.<name>`` set to each variable for this transaction only (``set_config``'s
        ``is_local``: a rollback or the end of the transaction forgets it), name and value
        bound, never written into the text. The row-level security policies ``structq grants``
        prints read them with ``current_setting('structq.<name>', true)``. A list or a null has
        no one text form: it is left unset, and a policy that needs it matches no row."""
        calls, params = [], {}
        for name, value in sorted(variables.items()):
            written = setting_text(value)
            if written is not None:
                n = len(calls)
                calls.append(f"set_config(:name_{n}, :value_{n}, true)")
                params |= {f"name_{n}": ROW_SETTING_PREFIX + name, f"value_{n}": written}
        # One statement for all of them: one round trip, whatever the number of variables.
        return [Setup("SELECT " + ", ".join(calls), params)] if calls else []

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
