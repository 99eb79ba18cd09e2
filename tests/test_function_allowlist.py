"""Every entry of the function allowlist is checked against what sqlglot parses it into.

The allowlist (``structq/safety/functions.py``) names functions two ways: lower-case names that
sqlglot leaves anonymous, and expression classes. sqlglot turns many names into classes of its
own, and which ones changes between dialects and versions (MySQL's ``ANY_VALUE`` is an
``exp.AnyValue``, ``SPACE`` an ``exp.Space``; PostgreSQL's ``make_timestamp`` a
``TimestampFromParts``). An entry whose name parses into a class the list does not hold is
refused although it is listed. So, per dialect, every entry is parsed with every number of
arguments from 0 to 6, and every function node that comes out must be allowed.
"""

from __future__ import annotations

import logging

import pytest
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from sandbox_support import manifest
from structq.errors import SandboxViolation
from structq.safety import check_sql
from structq.safety import functions as allowlist

DIALECTS = ("sqlite", "postgres", "mysql")
ARITIES = range(7)

logging.getLogger("sqlglot").setLevel(logging.ERROR)


def _calls(name: str, dialect: str) -> list[exp.Expr]:
    """``SELECT name(a0, …)`` parsed for each arity sqlglot accepts: the statements."""
    trees = []
    for arity in ARITIES:
        arguments = ", ".join(f"a{i}" for i in range(arity))
        try:
            trees.append(sqlglot.parse_one(f"SELECT {name}({arguments})", read=dialect))
        except (ParseError, TokenError, TypeError, ValueError):
            continue  # sqlglot insists on other arguments for this arity (DATE_ADD wants INTERVAL)
    return trees


def _not_allowed(trees: list[exp.Expr], dialect: str) -> set[str]:
    return {
        type(node).__name__
        for tree in trees
        for node in tree.find_all(exp.Func)
        if not allowlist.is_allowed(node, dialect, ())
    }


NAMED = [(dialect, name) for dialect in DIALECTS for name in sorted(allowlist._ANONYMOUS[dialect])]
CLASSES = [
    (dialect, name)
    for dialect in DIALECTS
    for cls in sorted(allowlist._COMMON | allowlist._DIALECT_CLASSES.get(dialect, frozenset()), key=lambda c: c.__name__)
    for name in (cls.sql_names() if issubclass(cls, exp.Func) else ())
]


@pytest.mark.parametrize("dialect, name", NAMED, ids=[f"{d}-{n}" for d, n in NAMED])
def test_every_listed_name_parses_into_something_allowed(dialect: str, name: str) -> None:
    trees = _calls(name, dialect)
    assert trees, f"{name}() parses with no number of arguments on {dialect}"
    assert not _not_allowed(trees, dialect), f"{name}() on {dialect} becomes classes the allowlist misses"


@pytest.mark.parametrize("dialect, name", CLASSES, ids=[f"{d}-{n}" for d, n in CLASSES])
def test_every_listed_class_reparses_into_something_allowed(dialect: str, name: str) -> None:
    # A class's own SQL name, written by a person, must not become a class that is refused.
    assert not _not_allowed(_calls(name, dialect), dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_table_function_is_one_in_from(dialect: str) -> None:
    for name in allowlist.TABLE_FUNCTIONS[dialect]:
        source = sqlglot.parse_one(f"SELECT 1 FROM {name}(a0, a1) AS t", read=dialect).args["from_"].this
        if isinstance(source, exp.Unnest):  # a source of its own in sqlglot, checked as a call
            assert allowlist.is_allowed(source, dialect, ()), name
            continue
        assert isinstance(source, exp.Table) and isinstance(source.this, exp.Func), name
        assert allowlist.is_table_function(source.this, dialect), name


def test_unresolved_class_names_are_none() -> None:
    assert allowlist.UNRESOLVED == []


@pytest.mark.parametrize("dialect, query, written", [
    ("mysql", "SELECT CONVERT_TZ(d.title, '+00:00', '+01:00') AS c FROM departments AS d", "CONVERT_TZ"),
    ("postgres", "SELECT pg_sleep(1) AS x", "pg_sleep"),
    ("mysql", "SELECT Benchmark(10, 1) AS x", "Benchmark"),
])
def test_refusals_name_the_function_as_written(dialect: str, query: str, written: str) -> None:
    with pytest.raises(SandboxViolation) as info:
        check_sql(query, manifest(dialect), vars={"tenant_id": 7})
    assert info.value.code == "denied_function"
    assert f"{written}()" in info.value.message


def test_the_manifest_may_list_a_function_as_written() -> None:
    extended = manifest("mysql").model_copy(update={"functions": ["convert_tz"]})
    check_sql("SELECT CONVERT_TZ(d.title, '+00:00', '+01:00') AS c FROM departments AS d", extended)
