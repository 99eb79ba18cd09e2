"""Names the SQL that runs must quote where sqlglot would write them bare.

Names reach the rewritten query from places other than the query's text: a star expands to
the manifest's columns (``x.group AS group``), qualification writes qualifiers, output aliases
and the columns of a USING join, a derived table's outputs are named again outside it. sqlglot
writes such an identifier unquoted unless the node says otherwise, so a table with a column
called ``group``, or a table called ``Shop ID``, made ``SELECT *`` a syntax error — and a name
read from a catalogue (``sync``) could even be SQL text. Two kinds of name need quotes:

- a name that is not a plain identifier (``str.isidentifier``: letters, digits and ``_``, not
  starting with a digit): ``Shop ID``, ``a.b``, ``say "hi"``, ``1st``;
- a word the database reserves. MySQL's generator quotes its own; for SQLite and PostgreSQL
  sqlglot knows none, so they are listed here. The lists err on the side of more words:
  SQLite's are every keyword of its language (sqlite.org, "SQL Keywords"), though its parser
  takes most of them as names where nothing else fits — the ones SQLite 3.40 refuses as a
  column after a dot, an output alias or a table alias are all among them (tested on the
  database); PostgreSQL's are those ``pg_get_keywords()`` lists as reserved (``R``) or reserved
  but usable as a function or type name (``T``): neither may be a table alias or a bare column
  (``ColId``).

Generation quotes every unquoted identifier either rule picks (``dialects.py``), whoever made
the node — a reserved word on SQLite in any case (``Index``, a manifest's spelling), on
PostgreSQL in lower case only. That changes nothing a name means: SQLite and MySQL ignore case
in names, quoted or not; a quoted lower-case name is what PostgreSQL folds the bare one to (a
bare ``Index`` there means ``index``; a name the manifest spells so is written quoted
already); and a name that is not a plain identifier means nothing bare. The generator's
handler costs ~0.1 µs an identifier (0.15× the parse of a 20-identifier query), so it is used
only when the query has such a name (``parse.scan``), or a table it reads does, in its name
or a column's (``schema.Derived.tables_to_quote``), or the manifest's schema does.
"""

from __future__ import annotations

__all__ = ["needs_quotes_bare", "reserved_in_any_case", "reserved_words"]

_SQLITE = frozenset("""
abort action add after all alter always analyze and as asc attach autoincrement before begin
between by cascade case cast check collate column commit conflict constraint create cross
current current_date current_time current_timestamp database default deferrable deferred
delete desc detach distinct do drop each else end escape except exclude exclusive exists
explain fail filter first following for foreign from full generated glob group groups having
if ignore immediate in index indexed initially inner insert instead intersect into is isnull
join key last left like limit match materialized natural no not nothing notnull null nulls of
offset on or order others outer over partition plan pragma preceding primary query raise
range recursive references regexp reindex release rename replace restrict returning right
rollback row rows savepoint select set table temp temporary then ties to transaction trigger
unbounded union unique update using vacuum values view virtual when where window with without
""".split())

_POSTGRES = frozenset("""
all analyse analyze and any array as asc asymmetric both case cast check collate column
constraint create current_catalog current_date current_role current_time current_timestamp
current_user default deferrable desc distinct do else end except false fetch for foreign from
grant group having in initially intersect into lateral leading limit localtime localtimestamp
not null offset on only or order placing primary references returning select session_user
some symmetric table then to trailing true union unique user using variadic when where window
with
authorization binary collation concurrently cross current_schema freeze full ilike inner is
isnull join left like natural notnull outer overlaps right similar tablesample verbose
""".split())

_WORDS = {"sqlite": _SQLITE, "postgres": _POSTGRES}
#: The dialects whose databases match every name without regard to (ASCII) case, quoted or not.
_ANY_CASE = frozenset({"sqlite"})


def reserved_words(sql_dialect: str) -> frozenset[str]:
    """The lower-case words generation must quote in ``sql_dialect`` (none where sqlglot's own
    generator does it: MySQL)."""
    return _WORDS.get(sql_dialect, frozenset())


def needs_quotes_bare(name: str, words: frozenset[str]) -> bool:
    """Whether ``name`` needs quotes in a dialect reserving ``words`` (lower-case words: a
    name in another case is one of them only where the database ignores case, and the caller
    lowers it then, ``reserved_in_any_case``)."""
    return name in words or not name.isidentifier()


def reserved_in_any_case(sql_dialect: str) -> bool:
    """Whether a name is one of ``reserved_words`` in any case (``Index``), not in lower case
    only: an unquoted identifier's text needs quotes when ``needs_quotes_bare`` says so of it,
    lower-cased where this is true."""
    return sql_dialect in _ANY_CASE
