"""Earlier results as typed tables: each column's type inferred once, from all its values.

SQLite caveat: columns have *affinities*, not types. Types are inferred from all of a column's
values (never the first row only, so the row order does not change them) and declared so that
values come back as they went in:

=========  ===============================  ================================================
type       values                           stored as
=========  ===============================  ================================================
integer    ints (and bools mixed in)        INTEGER
real       ints and floats, and numbers     REAL; numeric text as the nearest double
           written as text (see below)
boolean    bools only                       0/1, read back as ``True``/``False``
json       any list or dict                 JSON text, read back as lists/dicts
text       anything else; ints too big for  TEXT (``True`` as ``'true'``)
           64 bits (a wrong number is worse
           than text)
=========  ===============================  ================================================

Numbers written as text: ``values.py`` keeps a ``Decimal`` that no double holds exactly as
its digits (``"0.1000000000000000055"``) and NaN/infinity as ``"NaN"``/``"Infinity"``, so a
``NUMERIC`` column can arrive as ``[9.5, 100.25, "0.1000000000000000055"]``. Declared TEXT, such
a column would compare as text (``amount > 50`` false for 100.25, ``max`` picking ``"9.5"``),
a wrong answer with nothing to show for it. So a column whose strings are all numbers — any
numeric literal beside real numbers, or only such ``values.py`` strings — is REAL: each
string is stored as the nearest double, and NaN as NULL (SQLite has no NaN). What that
changes is never silent: the result's ``notes`` say which column of which step lost digits
(with an example) or NaNs, and which columns holding numbers stayed text (numbers mixed with
words, or integers beyond 64 bits) and so compare and sort as text.

Booleans and JSON read back as such only when a result column *is* a table column
(``SELECT flag FROM t``); an expression over them (``flag AND x``, ``json_extract(…)``) comes
back as SQLite computes it. Dates and datetimes arrive as ISO text from the executors, which
SQLite's date functions read directly.

Odd column names (``count(*)``, ``销售额``, duplicates) are kept: identifiers are quoted by
sqlglot, duplicates get ``_2``, ``_3`` suffixes, and an empty name becomes ``column_N``.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from structq.capabilities.model import Column, Limits, Manifest, Table
from structq.capabilities.references import LOCAL_SOURCE
from structq.errors import ExecutionError

from ..base import ResultSet
from ..values import json_safe

__all__ = ["COLUMN_TYPES", "LocalTable", "describe_results", "infer_column_type", "local_manifest", "manifest_for"]

_INT64 = (-(2**63), 2**63 - 1)

# Declared types that pick the right affinity and tell sqlite3 how to read the value back
# (PARSE_DECLTYPES keys converters on the declared type's first word, case-insensitively).
_BOOLEAN_DECL = "STRUCTQ_BOOLEAN"  # no INT/CHAR/TEXT/REAL… inside: NUMERIC affinity, 0/1 stay ints
_JSON_DECL = "STRUCTQ_JSON_TEXT"  # contains TEXT: TEXT affinity, JSON text stays text
sqlite3.register_converter(_BOOLEAN_DECL, lambda raw: raw not in (b"0", b"0.0"))
sqlite3.register_converter(_JSON_DECL, lambda raw: json.loads(raw.decode("utf-8")))


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def _as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


#: A numeric literal as a database or a JSON document writes one (no spaces, no ``_``).
_NUMBER_TEXT = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
#: How ``values.py`` writes the numbers JSON has no literal for.
_NON_FINITE_TEXT = frozenset({"NaN", "Infinity", "-Infinity"})
_NUMBERS = frozenset({bool, int, float})


def _is_number_text(value: str) -> bool:
    """Whether ``value`` spells a number: a numeric literal, or NaN/±Infinity."""
    return value in _NON_FINITE_TEXT or _NUMBER_TEXT.fullmatch(value) is not None


def _kept_as_text(value: str) -> bool:
    """Whether ``value`` is exactly how ``values.py`` writes a number it cannot give as a
    float (``"0.1000000000000000055"``, ``"NaN"``) — text that is a number, not a word
    made of digits (``"007"`` and ``"1.2"`` would have arrived as numbers)."""
    return _is_number_text(value) and json_safe(Decimal(value)) == value


def _strings_are_numbers(strings: list[str], with_numbers: bool) -> bool:
    """Whether a column's strings are numbers that travelled as text.

    Beside real numbers any numeric literal counts (a document may hold ``"12"`` where
    others hold 12). In a column of strings only, only ``values.py``'s own number strings do,
    and one must be finite: ids, codes and versions written with digits stay text.
    """
    if with_numbers:
        return all(map(_is_number_text, strings))
    return all(map(_kept_as_text, strings)) and not set(strings) <= _NON_FINITE_TEXT


def _as_real(value: Any) -> Any:
    """A number for a REAL column: numeric text as the nearest double, NaN as NULL."""
    if type(value) is not str:
        return value
    number = float(value)
    return None if math.isnan(number) else number


@dataclass(frozen=True)
class _ColumnType:
    """A manifest type, how SQLite declares it, and how a Python value is stored in it."""

    name: str
    declared: str
    store: Callable[[Any], Any] | None  # None: every value is stored as it is
    #: Values of these types are stored as they are; only a column holding others is converted.
    native: frozenset[type] = field(default_factory=frozenset)


# sqlite3 binds bools as 0/1 and INTEGER/REAL affinities take numbers, so only JSON, numbers
# written as text and text columns that hold non-text values need converting.
COLUMN_TYPES = {
    t.name: t
    for t in (
        _ColumnType("integer", "INTEGER", None),
        _ColumnType("real", "REAL", _as_real, _NUMBERS),
        _ColumnType("boolean", _BOOLEAN_DECL, None),
        _ColumnType("json", _JSON_DECL, _as_json),
        _ColumnType("text", "TEXT", _as_text, frozenset({str})),
    )
}


def infer_column_type(values: Iterable[Any]) -> str:
    """``integer``, ``real``, ``boolean``, ``json`` or ``text`` for a column's values.

    Looks at every non-null value, so the answer does not depend on row order. Strings that
    are numbers (see the module docstring) make a column ``real``, not ``text``.
    """
    values = values if isinstance(values, (list, tuple)) else list(values)
    kinds = set(map(type, values)) - {type(None)}
    if tuple in kinds:
        kinds = (kinds - {tuple}) | {list}
    if list in kinds or dict in kinds:
        return "json"
    if kinds == {bool}:
        return "boolean"
    if not kinds or not kinds <= _NUMBERS | {str}:
        return "text"
    if str in kinds:
        strings = [v for v in values if type(v) is str]
        if not _strings_are_numbers(strings, with_numbers=bool(kinds & {int, float})):
            return "text"
    if int in kinds and not _fits_int64(values):
        return "text"  # SQLite integers are 64-bit; text keeps every digit
    return "real" if kinds & {float, str} else "integer"


def _fits_int64(values: Iterable[Any]) -> bool:
    ints = [v for v in values if type(v) is int]
    return _INT64[0] <= min(ints) and max(ints) <= _INT64[1]


def _rounded_by_real(value: Any) -> bool:
    """Whether a REAL column stores ``value`` as a different number (numeric text with more
    digits than a double holds, an integer beyond 2**53)."""
    if type(value) is int:
        return float(value) != value
    if type(value) is str and value not in _NON_FINITE_TEXT:
        return Decimal(value) != Decimal(float(value))
    return False


def _load_notes(step: str, column: str, kind: str, values: tuple[Any, ...]) -> list[str]:
    """What storing ``values`` as ``kind`` changed, for the result's notes (see the module
    docstring): numbers rounded or NaNs dropped in a REAL column, numbers kept as text."""
    where = f"column {column!r} of step {step!r}"
    if kind == "text" and any(type(v) in (int, float) for v in values):
        return [f"{where} holds numbers with text or integers beyond 64 bits, so it was loaded as "
                "text: comparisons, sorting, min and max on it are textual ('10' < '9')"]
    if kind != "real":
        return []
    rounded = [v for v in values if _rounded_by_real(v)]
    notes = []
    if rounded:
        notes.append(f"{where}: {len(rounded)} value(s) have more digits than a double holds and were "
                     f"rounded for this step (e.g. {rounded[0]} became {float(rounded[0])!r})")
    nans = values.count("NaN")
    if nans:
        notes.append(f"{where}: {nans} NaN value(s) were loaded as NULL (SQLite has no NaN)")
    return notes


@dataclass(frozen=True)
class LocalTable:
    """One earlier result as a table: its name, (column, type) pairs and rows."""

    name: str
    columns: tuple[tuple[str, str], ...]
    rows: list[tuple[Any, ...]]
    #: What loading changed (rounded numbers, numbers kept as text), in words.
    notes: tuple[str, ...] = ()

    def stored_rows(self) -> Iterable[tuple[Any, ...]]:
        """Rows converted for storage in the declared column types."""
        stores = {
            i: column_type.store
            for i, column_type in enumerate(COLUMN_TYPES[kind] for _, kind in self.columns)
            if column_type.store is not None and not self._all_native(i, column_type.native)
        }
        if not stores:
            return self.rows
        return (
            tuple(v if v is None or i not in stores else stores[i](v) for i, v in enumerate(row))
            for row in self.rows
        )

    def _all_native(self, index: int, native: frozenset[type]) -> bool:
        return set(map(type, (row[index] for row in self.rows))) <= native | {type(None)}


def _unique_names(columns: Iterable[str]) -> list[str]:
    """Column names SQLite accepts in one table: non-empty, unique case-insensitively."""
    names: list[str] = []
    seen: set[str] = set()
    for position, name in enumerate(columns, start=1):
        candidate = name or f"column_{position}"
        base, n = candidate, 1
        while candidate.lower() in seen:
            n += 1
            candidate = f"{base}_{n}"
        seen.add(candidate.lower())
        names.append(candidate)
    return names


def describe_results(results: Mapping[str, ResultSet]) -> list[LocalTable]:
    """The tables ``results`` become, in name order (so load order never varies).

    A result without columns has nothing to query and is left out.
    """
    tables = []
    for key in sorted(results):
        result = results[key]
        if not result.columns:
            continue
        names = _unique_names(result.columns)
        if set(map(len, result.rows)) - {len(names)}:
            raise ExecutionError(
                f"the result of step {key!r} has rows that do not match its {len(names)} columns",
                source=LOCAL_SOURCE, step=key,
            )
        by_column = list(zip(*result.rows)) if result.rows else [()] * len(names)
        kinds = [infer_column_type(values) for values in by_column]
        notes = [note for name, kind, values in zip(names, kinds, by_column)
                 for note in _load_notes(key, name, kind, values)]
        tables.append(LocalTable(key, tuple(zip(names, kinds)), result.rows, tuple(notes)))
    return tables


def _manifest_table(table: LocalTable) -> Table:
    columns = []
    for name, kind in table.columns:
        fields = {"name": name, "type": kind, "description": f"column of step {table.name}'s result"}
        try:
            columns.append(Column(**fields))
        except ValidationError:
            # A result column is whatever the source called it (`` total``, a tab inside):
            # the rules for names people write do not apply to it.
            columns.append(Column.model_construct(**fields))
    return Table(name=table.name, description=f"result of step {table.name}", columns=columns)


def local_manifest(results: Mapping[str, ResultSet], *, limits: Limits | None = None) -> Manifest:
    """A manifest describing ``results`` as tables of the ``local`` source (SQLite dialect),
    for ``check_sql``."""
    return manifest_for(describe_results(results), limits)


def manifest_for(tables: list[LocalTable], limits: Limits | None) -> Manifest:
    """The ``local`` manifest of ``tables``: one object per set of table names, column names
    and types (and limits), whatever the rows. The sandbox remembers checks by manifest
    object (``safety.sql.memo``), so a plan's local step run again on new rows of the same
    types is not checked again; nothing in the manifest depends on the rows."""
    key = (tuple((t.name, t.columns) for t in tables), limits)
    with _manifests_lock:
        found = _manifests.get(key)
        if found is not None:
            _manifests.move_to_end(key)
            return found
    manifest = Manifest(
        source=LOCAL_SOURCE,
        kind="sql",
        url="sqlite://",
        dialect="sqlite",
        description="earlier steps' results; each output_key is a table",
        limits=limits or Limits(),
        tables=[_manifest_table(t) for t in tables],
    )
    with _manifests_lock:
        manifest = _manifests.setdefault(key, manifest)
        while len(_manifests) > _MANIFESTS_KEPT:
            _manifests.popitem(last=False)
    return manifest


#: Local manifests by their tables' shape (``manifest_for``), the least recently used dropped first.
_MANIFESTS_KEPT = 256
_manifests: OrderedDict[tuple[Any, ...], Manifest] = OrderedDict()
_manifests_lock = threading.Lock()
