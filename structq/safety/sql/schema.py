"""What the rules derive from a manifest once and reuse: sqlglot schemas and parsed filters.

A manifest is immutable once loaded, so these are derived once per manifest object and kept
as long as it lives (``safety/per_object.py``): on a 1,000-table manifest deriving costs what
a hundred checks do. ``Derived.schema`` (sqlglot's ``MappingSchema`` of every allowed column,
what ``qualify_columns`` resolves against) is built by the first check that needs it.

Names are matched without regard to case on every dialect (``names_dialect``), and each
table and column that resolves is then written in the manifest's spelling, quoted where the
dialect would otherwise fold it (``resolve_tables``, ``check_columns``). The manifest spells
each name as the database stores it, so the database receives exactly that name — PostgreSQL's
``"Patient"."ID"`` as well as MySQL's case-sensitive table names — whatever case the query
used. Matching can only pick a declared name, never reach an undeclared one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import ASCII_LOWER, Dialect, NormalizationStrategy
from sqlglot.schema import MappingSchema

from structq.capabilities import Column, Manifest, Table
from structq.errors import SandboxViolation

from ..per_object import PerObject
from .quoting import needs_quotes_bare, reserved_words

__all__ = ["Derived", "derived", "identifier", "needs_quotes"]

_TYPES = {
    "text": "TEXT",
    "integer": "BIGINT",
    "real": "DOUBLE",
    "numeric": "DECIMAL",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "datetime": "TIMESTAMP",
    "json": "JSON",
    "binary": "VARBINARY",
}
#: Most identifier texts remembered per source, and the longest (``Derived.plain_names``):
#: bounded, so that queries inventing names cannot grow it without end.
PLAIN_NAMES = 4096
PLAIN_NAME_LENGTH = 64
#: Matching names without regard to case (see the module docstring).
_NAME_SETTINGS = "{}, normalization_strategy = case_insensitive"


@dataclass(frozen=True)
class Derived:
    #: The dialect names are normalised and matched with (see the module docstring).
    names_dialect: Dialect
    #: What ``names_dialect.normalize_identifier`` does to an identifier's text, as a plain
    #: function of the text (``parse.scan`` applies it to every identifier).
    lower: Callable[[str], str]
    #: Row filter predicate per table (lower-case name), parsed in the source dialect.
    filters: dict[str, exp.Expr]
    #: Lower-case denied column name → names of the tables that deny it.
    denied: dict[str, frozenset[str]]
    #: Lower-case names of the tables that deny at least one column.
    partial: frozenset[str]
    #: Lower-case table name → its allowed columns, lower-case name → manifest spelling, in
    #: manifest order (what ``resolution/database_names.py`` looks a name up in).
    allowed: dict[str, dict[str, str]]
    #: Lower-case table name → its entry; per lower-case table name, lower-case column name →
    #: its entry, denied ones included (``Manifest.table`` / ``Table.column`` as dictionaries).
    tables: dict[str, Table]
    columns: dict[str, dict[str, Column]]
    #: ``columns`` without the denied ones, each as ``check_columns`` records a column read:
    #: (its spelling, whether that needs quotes, ``table.column`` for ``SafeQuery.columns``).
    readable: dict[str, dict[str, tuple[str, bool, str]]]
    #: Lower-case name of every column of every table, denied ones included (the names a
    #: double-quoted SQLite name could mean: ``rules/double_quoted_strings.py``).
    column_names: frozenset[str]
    #: Whether each table and column name, as the manifest spells it, needs quotes in the
    #: source's dialect (``needs_quotes``).
    quoted: dict[str, bool]
    #: Lower-case names of the tables with a column whose ``values`` are enforced (not
    #: ``draft``): the only ones ``rules/enum_literals.py`` has anything to check on.
    enum_tables: frozenset[str]
    #: The words the source's database reserves (``quoting.py``); the lower-case names of the
    #: tables whose name or a column's needs quotes sqlglot would not write; whether the
    #: manifest's schema does.
    reserved: frozenset[str]
    tables_to_quote: frozenset[str]
    schema_to_quote: bool
    #: Identifier texts ``parse.scan`` has seen that are visible and need no quotes, each
    #: with its lower-cased form: most queries on one source repeat the same few names, and
    #: one look-up answers what five string tests would. At most ``PLAIN_NAMES`` names of at
    #: most ``PLAIN_NAME_LENGTH`` characters are kept.
    plain_names: dict[str, str] = field(default_factory=dict)
    #: The manifest's tables and its dialect's name, for ``schema``.
    all_tables: tuple[Table, ...] = ()
    sql_dialect: str = ""

    @functools.cached_property
    def schema(self) -> MappingSchema:
        """Allowed columns only: a denied column does not exist as far as qualification knows.

        Every name quoted, so that sqlglot reads it as spelled; one generator writes them all
        (``Expr.sql`` would build a dialect and a generator per name).
        """
        generator = Dialect.get_or_raise(self.sql_dialect).generator()

        def quoted(name: str) -> str:
            return generator.generate(exp.to_identifier(name, quoted=True), copy=False)

        mapping = {
            quoted(table.name): {quoted(c.name): _TYPES[c.type] for c in table.allowed_columns}
            for table in self.all_tables
        }
        return MappingSchema(mapping, dialect=self.names_dialect)

    def identifier(self, name: str) -> exp.Identifier:
        """``identifier(name, <the source's dialect>)``, for a name the manifest declares."""
        return exp.Identifier(this=name, quoted=self.quoted[name])


#: What was derived from each manifest object alive.
_derived: PerObject[Manifest, Derived] = PerObject()


def _filter(manifest: Manifest, table: str, dialect: str) -> exp.Expr | None:
    predicates = []
    for row_filter in manifest.row_filters_for(table):
        if row_filter.where is None:
            continue
        try:
            predicates.append(sqlglot.parse_one(row_filter.where, read=dialect))
        except sqlglot.errors.ParseError as exc:
            raise SandboxViolation(
                "row_filter",
                f"the row filter of table {table!r} does not parse: {str(exc).splitlines()[0]}",
                hint="fix policies.row_filters in the manifest",
                source=manifest.source,
            ) from None
    if not predicates:
        return None
    return exp.and_(*predicates, copy=False) if len(predicates) > 1 else predicates[0]


def _ascii_lower(text: str) -> str:
    # ``str.lower`` is what the table does to an ASCII text, at a fraction of the cost.
    return text.lower() if text.isascii() else text.translate(ASCII_LOWER)


def needs_quotes(name: str, dialect: Dialect) -> bool:
    """Whether ``name`` written unquoted would reach the database as a different name."""
    return dialect.quote_identifier(exp.to_identifier(name), identify=False).quoted


def identifier(name: str, dialect: Dialect) -> exp.Identifier:
    """``name`` as an identifier that keeps its exact spelling, quoted only when needed."""
    return exp.to_identifier(name, quoted=needs_quotes(name, dialect))


def derived(manifest: Manifest) -> Derived:
    """The schema, filters and denied names of ``manifest``, derived once per manifest object."""
    return _derived.get(manifest, _derive)


def _derive(manifest: Manifest) -> Derived:
    dialect = manifest.sql_dialect
    names_dialect = Dialect.get_or_raise(_NAME_SETTINGS.format(dialect))
    assert names_dialect.normalization_strategy is NormalizationStrategy.CASE_INSENSITIVE
    denied: dict[str, set[str]] = {}
    for table in manifest.tables:
        for column in table.columns:
            if column.denied:
                denied.setdefault(column.name.lower(), set()).add(table.name.lower())
    filters = {}
    for table in manifest.tables:
        predicate = _filter(manifest, table.name, dialect)
        if predicate is not None:
            filters[table.name.lower()] = predicate
    by_name: dict[str, Table] = {}
    columns: dict[str, dict[str, Column]] = {}
    for table in manifest.tables:
        # First match wins, as in ``Manifest.table`` and ``Table.column``.
        if by_name.setdefault(table.name.lower(), table) is table:
            entries = columns[table.name.lower()] = {}
            for column in table.columns:
                entries.setdefault(column.name.lower(), column)
    source_dialect = Dialect.get_or_raise(dialect)
    names = {t.name for t in manifest.tables} | {c.name for t in manifest.tables for c in t.columns}
    quoted = {name: needs_quotes(name, source_dialect) for name in names}
    reserved = reserved_words(dialect)
    return Derived(
        names_dialect=names_dialect,
        lower=_ascii_lower if names_dialect.ASCII_ONLY_NORMALIZATION else str.lower,
        filters=filters,
        denied={name: frozenset(tables) for name, tables in denied.items()},
        partial=frozenset(table for tables in denied.values() for table in tables),
        allowed={t.name.lower(): {c.name.lower(): c.name for c in t.allowed_columns} for t in manifest.tables},
        tables=by_name,
        columns=columns,
        readable={
            name: {key: (c.name, quoted[c.name], f"{by_name[name].name}.{c.name}")
                   for key, c in entries.items() if not c.denied}
            for name, entries in columns.items()
        },
        column_names=frozenset(c.name.lower() for t in manifest.tables for c in t.columns),
        quoted=quoted,
        enum_tables=frozenset(t.name.lower() for t in manifest.tables if any(c.values and not c.draft for c in t.columns)),
        reserved=reserved,
        tables_to_quote=frozenset(
            t.name.lower() for t in manifest.tables
            if any(needs_quotes_bare(name.lower(), reserved) for name in (t.name, *(c.name for c in t.columns)))
        ),
        schema_to_quote=bool(manifest.schema_) and needs_quotes_bare(manifest.schema_.lower(), reserved),  # type: ignore[union-attr]
        all_tables=tuple(manifest.tables),
        sql_dialect=dialect,
    )
