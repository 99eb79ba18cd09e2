"""The rules of the SQL sandbox: one module each, and ``RULES``, the one order they run in.

Like sqlglot's optimizer rules, each rule is a function of one module here; it reads and
updates one ``Check`` (``../context.py``) and either returns or raises a ``SandboxViolation``
with a stable ``code``. Each module's docstring says what its rule guarantees and why.

Why this order:

- ``parse`` comes first: every other rule reads the tree and the indexes it builds;
  ``record_output_names`` reads the select list before any rule rewrites it;
- ``check_statement_kind`` and ``reject_placeholders`` need only the tree as parsed;
- ``resolve_tables`` and ``check_columns`` then say what each name reads, and qualify it
  (``read_double_quoted_strings`` between them: SQLite's ``"x"`` must be a string, or stay a
  name, before columns are resolved); the checks that depend on what a name reads —
  functions, types, sizes, growth, patterns, enum literals — come after them, on the tree
  as written and qualified. ``check_sizes`` bounds the numbers ``check_growth`` multiplies,
  and ``check_patterns`` shares ``check_growth``'s walk of the unchanged tree;
- rewrites run once every check has passed, so no check ever reads a rewrite:
  ``confine_reads`` (the second wall), ``bind_references``, then ``enforce_limit`` on the
  query as it will run;
- ``generate`` is last: the text that runs is written from the tree every rule has seen.

Helpers several rules share sit beside this package (``context``, ``dialects``, ``schema``,
``walk``, ``quoting``, ``keys``, ``memo``), and name resolution is its own package
(``../resolution``) behind one invariant.
"""

from __future__ import annotations

from collections.abc import Callable

from ..context import Check
from .columns import check_columns
from .confine import confine_reads
from .double_quoted_strings import read_double_quoted_strings
from .enum_literals import check_enum_literals
from .functions import check_functions
from .generate import generate
from .growth import check_growth
from .limit import enforce_limit
from .output_names import record_output_names
from .parse import parse
from .patterns import check_patterns
from .placeholders import reject_placeholders
from .references import bind_references
from .sizes import check_sizes
from .statement import check_statement_kind
from .tables import resolve_tables
from .types import check_types

__all__ = ["RULES"]

#: The rules, in the one order they run in (see the docstring for why).
RULES: tuple[Callable[[Check], None], ...] = (
    parse,
    record_output_names,
    check_statement_kind,
    reject_placeholders,
    resolve_tables,
    read_double_quoted_strings,
    check_columns,
    check_functions,
    check_types,
    check_sizes,
    check_growth,
    check_patterns,
    check_enum_literals,
    confine_reads,
    bind_references,
    enforce_limit,
    generate,
)
