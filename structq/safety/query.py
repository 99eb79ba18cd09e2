"""What the sandbox hands to an executor: a query it has checked and rewritten.

Executors run only ``SafeQuery`` objects; nothing else reaches a database. The SQL text is
regenerated from the checked tree (never the caller's text) and written with SQLAlchemy
``text()`` placeholders (``:name``) whatever the dialect; values travel in ``params``.

What an executor must know of the SQL sandbox's rewrites to run their output is defined here,
once, so that no executor reaches into the sandbox's rules: the schema every table of the
text is qualified with (``qualifying_schema``, which the executor pins the session to as a
second guard), the parameter a row-filter variable is bound as (``variable_parameter``, which
the executor also hands to the database's row-level security), and the longest pattern a
query may match with (``MAX_PATTERN_CHARS``, SQLite's own limit on every connection).
"""

from __future__ import annotations

import re
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Literal

__all__ = ["SafeQuery", "MAX_PATTERN_CHARS", "SYSTEM_SCHEMAS", "qualifying_schema",
           "variable_parameter"]

#: How ``text()`` escapes a colon that is not a bind (``'10\:30'``), and how SQLAlchemy undoes it
#: before sending (``sqlalchemy.sql.compiler.BIND_PARAMS_ESC``).
_ESCAPED_COLON = re.compile(r"\x5c(:\w*)(?![:\w])", re.UNICODE)


@dataclass(frozen=True)
class SafeQuery:
    """A checked query, ready to run.

    - ``text``: SQL for ``sqlalchemy.text()`` with ``:name`` placeholders (SQL sources).
    - ``body``: the search request body with references already substituted (search sources);
      for an API source what is sent: a GraphQL ``{"query", "variables"}``, a REST
      ``{"operation", "requests": [{"path", "query"}…]}``.
    - ``params``: bound values: row-filter variables and step references. A name listed in
      ``expanding`` is a list bound with ``bindparam(name, expanding=True)``; other values are
      bound as they are (on PostgreSQL a list is an array for ``= ANY(:name)``, on SQLite a JSON
      text for ``json_each(:name)``: the sandbox picked the form from the dialect).
    - ``tables`` / ``columns``: what the query reads (``table`` and ``table.column``), for
      audit and tests; for search, the index and its fields.
    - ``names``: the result columns' names as the query wrote them, which the executor gives
      the result instead of the database's (``max(kapazität)``, ``sbCustId``); None: the database's.
    - ``switches``: PostgreSQL only, ``{switch: list}``: a boolean parameter that picks how a
      long list is searched, hashed or plain ``= ANY`` (``safety/sql/rules/references.py``). The
      sandbox binds False; the executor may send True instead, when the list will be hashed
      (``executors/sql/postgresql/``), and reports the value it sent in the result's
      ``params``. Either value selects the same rows.
    - ``limit``: the most rows the executor fetches (``max_rows + 1``), so that one row more
      than ``max_rows`` tells that the result was truncated.
    """

    source: str
    kind: Literal["sql", "search", "graphql", "openapi"]
    limit: int
    max_rows: int
    text: str | None = None
    body: dict[str, Any] | None = None
    index: str | None = None
    dialect: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    expanding: frozenset[str] = frozenset()
    tables: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    names: tuple[str, ...] | None = None
    switches: dict[str, str] = field(default_factory=dict)

    @property
    def sent_text(self) -> str | None:
        """The SQL as the database receives it, for people and logs: ``text`` with
        SQLAlchemy's ``\\:`` escapes undone (``'10:30'``, not ``'10\\:30'``); each bound
        value still shows as ``:name`` (the driver writes its own placeholder there)."""
        if self.text is None or "\\:" not in self.text:
            return self.text
        return _ESCAPED_COLON.sub(lambda m: m.group(1), self.text)

    @classmethod
    def built(cls, **values: Any) -> SafeQuery:
        """``SafeQuery(**values)``, without the frozen dataclass's ``__init__``: it sets each of
        the 14 fields through ``object.__setattr__`` (1.7 µs, where this takes 0.5), and the
        sandbox builds one per full check. The same object: every field not given takes its
        default (a factory's called), and a name that is no field is refused alike."""
        if not values.keys() <= _FIELDS:
            raise TypeError(f"SafeQuery has no field {sorted(values.keys() - _FIELDS)[0]!r}")
        query = object.__new__(cls)
        state = query.__dict__
        state.update(_DEFAULTS)
        for name, make in _FACTORIES:
            if name not in values:
                state[name] = make()
        state.update(values)
        return query

    def with_params(self, params: dict[str, Any]) -> SafeQuery:
        """This query with other values bound: ``dataclasses.replace(self, params=params)``
        without a frozen dataclass's ``__init__``, which sets every field through
        ``object.__setattr__`` (4 µs, where this copy takes 1): a remembered check
        (``safety/sql/memo.py``) binds its values again on every run."""
        copy = object.__new__(SafeQuery)
        copy.__dict__.update(self.__dict__)
        copy.__dict__["params"] = params
        return copy

    @property
    def sent(self) -> str | dict[str, Any] | None:
        """What is sent, for results and ``--json``: the SQL as ``sent_text``, or the body."""
        return self.sent_text if self.kind == "sql" else self.body

    def __str__(self) -> str:
        if self.kind == "sql":
            return self.sent_text or ""
        import json

        return f"{self.index} {json.dumps(self.body, ensure_ascii=False)}"


_FIELDS = frozenset(f.name for f in fields(SafeQuery))
#: The fields with a default value, and those with a factory (``SafeQuery.built``).
_DEFAULTS = {f.name: f.default for f in fields(SafeQuery) if f.default is not MISSING}
_FACTORIES = tuple((f.name, f.default_factory) for f in fields(SafeQuery) if f.default_factory is not MISSING)


#: Schemas that hold the database's catalogs and settings, never business tables (lower case).
SYSTEM_SCHEMAS = frozenset(
    "information_schema pg_catalog pg_toast pg_temp mysql performance_schema sys sqlite_temp_master temp".split()
)

#: The longest LIKE / GLOB / SIMILAR TO / regular-expression pattern a query may write.
MAX_PATTERN_CHARS = 100

#: Row-filter variable ``name`` is bound as the parameter ``var_<name>``.
_VARIABLE_PREFIX = "var_"


def qualifying_schema(schema: str | None, dialect: str) -> str | None:
    """The schema every table of a checked query's text is qualified with, or None: the
    manifest's ``schema`` on any dialect but SQLite (whose connection holds one database),
    unless it names a system schema, which no query may read."""
    if not schema or dialect == "sqlite" or schema.lower() in SYSTEM_SCHEMAS:
        return None
    return schema


def variable_parameter(name: str) -> str:
    """The parameter of ``SafeQuery.params`` that holds the row-filter variable ``name``."""
    return _VARIABLE_PREFIX + name
