"""The words an engine refuses as a bare name, which the SQL that runs must quote.

Names reach the rewritten query from places other than the query's text: a star expands to
the manifest's columns (``x.group AS group``), qualification writes output aliases and the
columns of a USING join, a derived table's outputs are named again outside it. sqlglot writes
such an identifier unquoted unless its characters need quotes, and for SQLite and PostgreSQL
it knows no reserved words, so a table with a column called ``group`` or ``order`` would make
``SELECT *`` a syntax error. MySQL's generator quotes its reserved words itself.

So generation quotes every unquoted identifier whose text is one of these words, in lower
case (``dialects.py``), whoever made the node. That changes nothing the name means: a quoted
lower-case name is what PostgreSQL folds the bare one to, and SQLite ignores case in names
either way. (Identifiers are lower-cased for matching, ``parse.scan``; a name in another case
is one the manifest spells so, written quoted already.) So the lists err on the side of more
words:

- SQLite: every keyword of its language (sqlite.org, "SQL Keywords"), though its parser takes
  most of them as names where nothing else fits; the ones that SQLite 3.40 refuses as a
  column after a dot, an output alias or a table alias are all among them (tested on the
  engine).
- PostgreSQL: the words ``pg_get_keywords()`` lists as reserved (``R``) or reserved but usable
  as a function or type name (``T``): neither may be a table alias or a bare column
  (``ColId``).
"""

from __future__ import annotations

__all__ = ["reserved_words"]

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


def reserved_words(sql_dialect: str) -> frozenset[str]:
    """The lower-case words generation must quote in ``sql_dialect`` (none where sqlglot's own
    generator does it: MySQL)."""
    return _WORDS.get(sql_dialect, frozenset())
