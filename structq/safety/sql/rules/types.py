"""Every data type a query names (cast targets, typed literals) is on an allowlist.

A cast can be a catalog read. On PostgreSQL ``CAST('secrets' AS regclass)`` answers whether an
undeclared table exists, ``CAST(CAST(10 AS oid) AS regrole)`` names a role, and ``regproc``,
``regnamespace``, ``regtype`` and ``regoper`` do the same for functions, schemas, types and
operators — the function allowlist never sees any of it, because a cast is not a call by
name. Types the database defines by name (``xid``, ``tid``, ``pg_lsn``, a schema's own types)
are refused for the same reason. So, as with functions, types are allowed, never denied: the
value types analysts cast to — numbers, strings, dates and times, booleans, JSON, UUIDs,
bytes, and arrays of those (the element type is checked as a type of its own).

SQLite is the exception that proves the rule: its ``CAST(x AS anything)`` only picks a
storage class by the words of the name and reaches nothing, so any name (``CAST(x AS
foo)``, which sqlglot reads as a user-defined type) is accepted there.
"""

from __future__ import annotations

from sqlglot import exp

from ..context import Check

__all__ = ["check_types", "ALLOWED_TYPES"]

_T = exp.DataType.Type

#: The value types a query may name, on every dialect.
ALLOWED_TYPES = frozenset(
    getattr(_T, name)
    for name in """
        TINYINT SMALLINT MEDIUMINT INT BIGINT UTINYINT USMALLINT UMEDIUMINT UINT UBIGINT
        DECIMAL UDECIMAL DOUBLE UDOUBLE FLOAT BIGDECIMAL MONEY BIT
        CHAR NCHAR VARCHAR NVARCHAR BPCHAR TEXT TINYTEXT MEDIUMTEXT LONGTEXT
        DATE TIME TIMETZ TIMESTAMP TIMESTAMPTZ TIMESTAMPLTZ TIMESTAMPNTZ DATETIME INTERVAL YEAR
        BOOLEAN JSON JSONB UUID BINARY VARBINARY BLOB ARRAY
    """.split()
)
#: Types allowed on top, per dialect (see the module docstring for SQLite's).
_DIALECT_TYPES = {"sqlite": frozenset({_T.USERDEFINED})}


def check_types(check: Check) -> None:
    """Refuse any data type that is not a plain value type (``ObjectIdentifier``: reg*, oid)."""
    if not check.types:
        return
    allowed = ALLOWED_TYPES | _DIALECT_TYPES.get(check.sql_dialect, frozenset())
    for node in check.types:
        if isinstance(node, exp.ObjectIdentifier) or node.this not in allowed:
            raise check.fail(
                "unsupported",
                f"the type {node.sql(check.dialect)} is not allowed",
                "cast only to value types: numbers (INTEGER, NUMERIC, …), text (TEXT, VARCHAR), DATE, "
                "TIME, TIMESTAMP, INTERVAL, BOOLEAN, JSON, UUID",
            )
