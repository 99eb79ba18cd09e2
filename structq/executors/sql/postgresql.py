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
  parameter left untyped (``_describe``: Parse and Describe in a savepoint, pipelined with the
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
- A temporary table filled with ``COPY``: not allowed — every transaction here is ``READ
  ONLY``, which refuses ``CREATE`` (temporary tables included) and ``COPY FROM``.
- Sending: a binary array is written from ``array`` slices in C (100k ints ~1.5 ms; their text
  from the list's repr took ~8 ms) and read by the server faster than text, though larger
  (8 bytes an int4 against ~7): 2.5 ms a round trip instead of 4. Sorting or deduplicating
  the list first would not help the hash (duplicates only meet their entry again); nothing is
  estimated per element any more where it would have.
- Reading step 1's 100k rows: ~9 ms of server work and transfer, ~9 ms for psycopg to make the
  tuples (binary results would save ~1 ms); checking every value JSON-safe took another 5 ms,
  which ``plain_columns`` skips for columns psycopg loads as ``int``, ``str`` or ``bool``.

Every statement is prepared (``prepare_threshold=0``) and psycopg deallocates its prepared
statements at each rollback, so every execution is planned with its own values: a custom
plan, in which the array is a constant and the switch is folded. Every other list (floats,
NULLs only, mixed) is adapted by psycopg as before. Results equal the subquery's, with either
switch value and against every integer width (``tests/test_references_postgres.py``).
"""

from __future__ import annotations

import functools
import operator
import re
import struct
import sys
from array import array
from typing import TYPE_CHECKING, Any, ClassVar

from .fetch import Statement, bind
from .guards import Backend, Setup, connect_timeout, milliseconds

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Connection

    from structq.safety.query import SafeQuery

__all__ = ["PostgresBackend", "pg_int_array"]


#: PostgreSQL's integer types, narrowest first: (element oid, array oid, ``array`` typecode,
#: bound): each holds -bound … bound - 1.
_PG_INTS = ((21, 1005, "h", 2**15), (23, 1007, "i", 2**31), (20, 1016, "q", 2**63))
_PG_INT_ARRAYS = {array_oid: (element, array_oid, code, bound) for element, array_oid, code, bound in _PG_INTS}
#: Whether ``array`` packs int2, int4 and int8 in 2, 4 and 8 bytes (every common platform);
#: elsewhere lists go to psycopg.
_PACKS = (array("h").itemsize, array("i").itemsize, array("q").itemsize) == (2, 4, 8)
_INT_KINDS = frozenset({int, type(None)})
_TEXT_KINDS = frozenset({str, type(None)})

#: Array types the server may infer for a list parameter whose elements' ``=`` it can hash
#: (built-in types with a hash opclass): bool, int2, int4, int8, float4, float8, numeric,
#: text, varchar, bpchar, name, date, time, timestamp, timestamptz, interval, uuid.
_HASHABLE_ARRAYS = frozenset({1000, 1005, 1007, 1016, 1021, 1022, 1231, 1009, 1015, 1014, 1003, 1182, 1183, 1115,
                              1185, 1187, 2951})
#: PostgreSQL hashes an ``= ANY`` array of at least this many elements (MIN_ARRAY_SIZE_FOR_HASHED_SAOP);
#: for a shorter one the element type does not matter.
HASHED_MIN = 9
#: A switched list (``references.py``) is searched through its hash when no table the query
#: reads holds more than this many rows per value (then a scan costs about what ``= ANY``'s
#: planning would, and an index could not win by much).
ROWS_PER_VALUE = 25

#: Result column types psycopg's default loaders give as ``int``, ``str`` or ``bool``, which
#: are JSON-safe as they are: bool, name, int8, int2, int4, text, oid, bpchar, varchar.
_PLAIN_COLUMNS = frozenset({16, 19, 20, 21, 23, 25, 26, 1042, 1043})

_SAVEPOINT = b"structq_list_types"
_BIND = re.compile(r"%%|%\((\w+)\)s")


class _PgIntArray:
    """A list of ints already in PostgreSQL's binary array format."""

    __slots__ = ("data",)
    oid: ClassVar[int]

    def __init__(self, data: bytes) -> None:
        self.data = data


@functools.cache
def _pg_array_classes() -> dict[int, type[_PgIntArray]]:
    return {array_oid: type(f"_PgIntArray{array_oid}", (_PgIntArray,), {"__slots__": (), "oid": array_oid})
            for _, array_oid, _, _ in _PG_INTS}


@functools.cache
def _pg_array_dumpers() -> dict[type[_PgIntArray], type]:
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    def dumper(array_class: type[_PgIntArray]) -> type:
        def dump(self: Any, obj: _PgIntArray) -> bytes:
            return obj.data

        return type(f"{array_class.__name__}Dumper", (Dumper,),
                    {"oid": array_class.oid, "format": Format.BINARY, "dump": dump})

    return {array_class: dumper(array_class) for array_class in _pg_array_classes().values()}


def pg_int_array(values: list[Any], like: int | None = None) -> _PgIntArray | None:
    """``values`` as a binary array when they are exact ints within 64 bits, NULLs allowed
    (at least one int); else None.

    ``like`` is the integer array type the server wants for the list (``_describe``: the type
    of the value compared with it): the list goes as that type, without the values the type
    cannot hold, which equal no value of it. Otherwise the list gets the narrowest type that
    holds every value (``int2[]``, ``int4[]``, ``int8[]``), as psycopg would type it. Either way
    it selects what the list selects: NULLs become one NULL, and a list none of whose values
    fit ``like`` goes as its first value alone (no match, or NULL for NULL, either way).
    """
    return _int_array(values, set(map(type, values)), like)


def _int_array(values: list[Any], kinds: set[type], like: int | None) -> _PgIntArray | None:
    if int not in kinds or not kinds <= _INT_KINDS or not _PACKS:
        return None
    nulls = type(None) in kinds
    ints = list(filter(functools.partial(operator.is_not, None), values)) if nulls else values
    if like in _PG_INT_ARRAYS:
        element, array_oid, code, bound = _PG_INT_ARRAYS[like]
        try:
            return _binary(element, array_oid, array(code, ints), nulls)
        except OverflowError:
            fitting = [v for v in ints if -bound <= v < bound]
            if fitting or nulls:
                return _binary(element, array_oid, array(code, fitting), nulls)
            ints = ints[:1]
    for element, array_oid, code, _ in _PG_INTS:
        try:
            packed = array(code, ints)  # OverflowError when a value does not fit
        except OverflowError:
            continue
        return _binary(element, array_oid, packed, nulls)
    return None


def _binary(element: int, array_oid: int, values: array, null: bool) -> _PgIntArray:
    """PostgreSQL's binary array: a header, then each element as its length and its bytes,
    big-endian; with ``null``, one NULL element last. Written by interleaving ``array``
    slices in C (100k ints: ~1.5 ms; their text from the list's repr took ~8 ms)."""
    n = len(values)
    if values.typecode == "q":  # the length, then the value as two 32-bit words, high first
        words = array("i", values.tobytes())
        high, low = (1, 0) if sys.byteorder == "little" else (0, 1)
        body = array("i", [8, 0, 0]) * n
        body[1::3], body[2::3] = words[high::2], words[low::2]
    elif values.typecode == "i":
        body = array("i", [4, 0]) * n
        body[1::2] = values
    else:  # "h": the 32-bit length as two 16-bit halves
        body = array("h", [0, 2, 0]) * n
        body[2::3] = values
    if sys.byteorder == "little":
        body.byteswap()
    header = struct.pack("!5i", 1, int(null), element, n + null, 1)
    return _pg_array_classes()[array_oid](header + body.tobytes() + (b"\xff\xff\xff\xff" if null else b""))


def _pg_registered(dbapi_connection: Any, array_class: type) -> bool:
    """Whether the connection dumps ``array_class`` with our dumper (set by ``on_connect``)."""
    from psycopg.adapt import PyFormat

    try:
        dumper = dbapi_connection.adapters.get_dumper(array_class, PyFormat.AUTO)
    except Exception:  # noqa: BLE001 - psycopg raises ProgrammingError when none is registered
        return False
    return dumper is _pg_array_dumpers().get(array_class)


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


def _describe(dbapi_connection: Any, text: str, tables: tuple[str, ...]
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
        """Lists bound as arrays of the type of the value they are compared with, and each
        switch (``SafeQuery.switches``) set to search its list through a hash when that is safe.

        PostgreSQL hashes ``x = ANY(array)`` only when the array's element type is exactly
        ``x``'s: ``int4 = ANY(int2[])`` or ``int8 = ANY(int4[])`` compares every row with every
        element. So when a list of ints could be hashed (``HASHED_MIN`` values or more) or is
        switched, the server is asked once what type it infers for each list parameter
        (``_describe``), and the ints go as that type (``pg_int_array``). Lists of text
        (dates included) go untyped through psycopg and get the inferred type on their own;
        other lists are adapted by psycopg as before.

        A switch is set when its list will be hashed (its type is the inferred one, and that
        type's ``=`` hashes) and no table the query reads holds more than ``ROWS_PER_VALUE``
        rows per value. Every other way, the plain ``= ANY`` runs: the same rows either way.
        """
        params = dict(query.params)
        lists = {name: value for name, value in params.items() if type(value) is list}
        if not lists:
            return bind(query), params
        switches = {name: switch for switch, name in query.switches.items()}
        kinds = {name: set(map(type, value)) for name, value in lists.items()}
        registered = _pg_registered(dbapi_connection, _pg_array_classes()[1007])
        wanted = registered and any(name in switches or (len(value) >= HASHED_MIN and int in kinds[name])
                                    for name, value in lists.items())
        described = _describe(dbapi_connection, query.text or "", query.tables if switches else ()) \
            if wanted else None
        inferred, rows = described if described is not None else ({}, None)
        for name, value in lists.items():
            like = inferred.get(name)
            array_value = _int_array(value, kinds[name], like) if registered else None
            if array_value is not None:
                params[name] = array_value
                hashed = array_value.oid == like
            else:  # psycopg sends a list of text untyped: the server gives it the inferred type
                hashed = like in _HASHABLE_ARRAYS and str in kinds[name] and kinds[name] <= _TEXT_KINDS
            if name in switches:
                params[switches[name]] = bool(hashed and rows is not None and rows <= ROWS_PER_VALUE * len(value))
        return bind(query), params

    def plain_columns(self, description: Any) -> bool:
        """Columns of types psycopg loads as ``int``, ``str`` or ``bool`` (``_PLAIN_COLUMNS``)."""
        return description is not None and all(column.type_code in _PLAIN_COLUMNS for column in description)

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
