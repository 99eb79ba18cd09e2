"""The sandbox's resource rules (``patterns.py``, ``growth.py``, ``sizes.py``) as allow/deny tables.

What legitimate queries do with patterns and strings stays accepted (every LIKE / ILIKE / REGEXP
of the defog, Spider and BIRD gold queries is, see ``test_sandbox_corpora.py``); what can make
one call run unboundedly is refused with ``pattern`` or ``string_size``. Execution on the three
databases is ``test_sandbox_hostile_limits.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sandbox_support as support
from corpora import hostile_manifest
from structq.errors import SandboxViolation
from structq.safety import SafeQuery, check_sql
from structq.safety.sql import CODES
from structq.safety.sql.rules.growth import MAX_CONSTANT_CHARS, MAX_GROWTH
from structq.safety.query import MAX_PATTERN_CHARS


def check(query: str, dialect: str, **params: list[object]) -> SafeQuery:
    return check_sql(query, hostile_manifest(dialect), params=params)


def refused(query: str, dialect: str, *, code: str, **params: list[object]) -> SandboxViolation:
    """``query`` is refused by the rule ``code`` names (see ``sandbox_support.refused``)."""
    return support.refused(check, query, dialect, code=code, **params)


LONGEST = "%" + "x" * (MAX_PATTERN_CHARS - 2) + "%"

ACCEPTED = [
    ("sqlite", "SELECT u.id FROM users AS u WHERE u.name LIKE '%bob%' AND u.email NOT LIKE '%@example.org'"),
    ("sqlite", 'SELECT u.id FROM users AS u WHERE u.name LIKE "%al%"'),  # SQLite's double-quoted string
    ("sqlite", "SELECT u.id FROM users AS u WHERE u.name GLOB 'a*' OR u.name REGEXP '^(a|b)[a-z]+$'"),
    ("sqlite", "SELECT u.id FROM users AS u WHERE like('%a%', u.name)"),
    ("sqlite", f"SELECT u.id FROM users AS u WHERE u.name LIKE '{LONGEST}'"),
    ("sqlite", "SELECT u.id FROM users AS u WHERE u.name LIKE '%!%%' ESCAPE '!'"),
    ("postgres", "SELECT u.id FROM users AS u WHERE LOWER(u.name) LIKE LOWER('%Martin%')"),
    ("postgres", "SELECT u.id FROM users AS u WHERE u.name ILIKE ANY (ARRAY['a%', 'b%'])"),
    ("postgres", "SELECT u.id FROM users AS u WHERE u.name ~* '^al' AND u.name !~ 'z' AND u.name SIMILAR TO '%(b|c)%'"),
    ("postgres", "SELECT regexp_replace(u.name, '[aeiou]', '', 'g') AS n, regexp_match(u.email, '@(.*)$') AS d "
                 "FROM users AS u"),
    ("postgres", "SELECT u.id FROM users AS u WHERE u.name LIKE '%' || 'li' || '%'"),
    ("postgres", "SELECT substring(u.name FROM 2 FOR 3) AS a, substring(u.name, length(u.email) - u.id) AS b, "
                 "substring(u.email FROM '@(.*)$') AS c FROM users AS u"),
    ("postgres", "SELECT repeat('-', 40) || u.name || repeat('-', 40) AS banner FROM users AS u"),
    ("postgres", "SELECT lpad(CAST(u.id AS TEXT), 8, '0') AS code, repeat(u.name, 3) AS r FROM users AS u"),
    ("postgres", "SELECT replace(u.name, ',', '') AS a, replace(u.name, '-', ' - ') AS b FROM users AS u"),
    ("postgres", "SELECT string_agg(u.name, ',') AS names FROM users AS u WHERE u.name LIKE 'a%'"),
    ("postgres", "SELECT u.name || ' ' || u.email || ' (' || u.status || ')' AS a, u.name || u.name AS b "
                 "FROM users AS u"),
    ("postgres", "WITH t AS (SELECT u.name || ' ' || u.email AS full, u.status FROM users AS u) "
                 "SELECT t.full || ' <' || t.status || '>' AS y FROM t"),
    ("postgres", "WITH RECURSIVE p(id, path) AS (SELECT u.id, u.name FROM users AS u WHERE u.id = 1 UNION ALL "
                 "SELECT e.id, p.path || '/' || e.name FROM p JOIN events AS e ON e.user_id = p.id WHERE e.id > p.id) "
                 "SELECT p.path FROM p"),
    ("postgres", "WITH RECURSIVE f(a, b) AS (SELECT 0, 1 UNION ALL SELECT f.b, f.a + f.b FROM f WHERE f.b < 100) "
                 "SELECT f.a FROM f"),
    ("mysql", "SELECT u.id FROM users AS u WHERE u.name LIKE CONCAT('%', 'li', '%') AND u.name RLIKE '^a'"),
    ("mysql", "SELECT GROUP_CONCAT(u.name) AS n FROM users AS u WHERE u.name NOT LIKE 'z%' GROUP BY u.status"),
    ("mysql", "SELECT RPAD(u.name, 20, '.') AS n, LPAD(u.id, 6, '0') AS s FROM users AS u"),
    ("sqlite", "SELECT printf('%-20s|%8.2f', u.name, u.age) AS line FROM users AS u"),
]

REFUSED = [
    # patterns that are not short literals
    ("sqlite", "SELECT u.id FROM users AS u WHERE u.name LIKE u.username", "pattern"),
    ("sqlite", "SELECT u.id FROM users AS u WHERE u.name REGEXP (SELECT e.name FROM events AS e LIMIT 1)", "pattern"),
    ("sqlite", "SELECT u.id FROM users AS u WHERE glob(u.username, u.name)", "pattern"),
    ("sqlite", f"SELECT u.id FROM users AS u WHERE u.name LIKE '{LONGEST}x'", "pattern"),
    ("postgres", "SELECT u.id FROM users AS u WHERE u.name ILIKE ANY (ARRAY['a%', u.username])", "pattern"),
    ("postgres", "SELECT regexp_replace(u.name, u.username, 'x') AS n FROM users AS u", "pattern"),
    ("postgres", "SELECT u.id FROM users AS u WHERE u.name SIMILAR TO u.username", "pattern"),
    ("postgres", "SELECT u.id FROM users AS u WHERE u.name ~ lower(u.username)", "pattern"),
    ("mysql", "SELECT u.id FROM users AS u WHERE u.name REGEXP CONCAT(u.username, '+')", "pattern"),
    ("postgres", "SELECT substring(u.name FROM u.username) AS a FROM users AS u", "pattern"),  # text: a regex
    ("postgres", "SELECT substring(u.name, u.status || '+') AS a FROM users AS u", "pattern"),
    # matches over aggregated text
    ("postgres", "SELECT u.status FROM users AS u GROUP BY u.status HAVING string_agg(u.name, '') LIKE '%a%b%'",
     "pattern"),
    ("mysql", "SELECT u.id FROM users AS u WHERE (SELECT GROUP_CONCAT(e.name) FROM events AS e) LIKE '%a%'",
     "pattern"),
    # sizes from the data, compounding growth, constant bombs
    ("postgres", "SELECT repeat('*', u.age) AS bar FROM users AS u", "string_size"),
    ("postgres", "SELECT rpad(u.name, u.age * 1000, 'x') AS n FROM users AS u", "string_size"),
    ("postgres", "SELECT repeat(u.name, 11) AS n FROM users AS u", "string_size"),
    ("postgres", "SELECT repeat(u.name, 4) AS a, repeat(u.email, 4) AS b FROM users AS u", "string_size"),
    ("postgres", "SELECT repeat(u.name, 0) AS a, repeat(u.email, 1000) AS b FROM users AS u", "string_size"),
    ("postgres", "WITH c AS (SELECT repeat(u.name, 5) AS x FROM users AS u) SELECT repeat(c.x, 5) AS y FROM c",
     "string_size"),
    ("postgres", "SELECT regexp_replace(u.name, '.', '\\&\\&\\&\\&\\&\\&\\&\\&\\&\\&', 'g') AS n FROM users AS u",
     "string_size"),
    ("postgres", "SELECT replace(u.name, 'a', u.email) AS n FROM users AS u", "string_size"),
    ("postgres", "SELECT repeat(string_agg(u.name, ''), 2) AS n FROM users AS u", "string_size"),
    ("sqlite", "SELECT " + " || ".join(["printf('%1000c', 'x')"] * 11) + " AS n", "string_size"),
    ("mysql", "SELECT REPEAT(REPEAT('ab', 1000), 1000) AS n", "string_size"),
    ("postgres", "WITH c AS (SELECT repeat(u.name, 2) AS x FROM users AS u) SELECT "
                 + " || ".join(["c.x"] * 6) + " AS y FROM c", "string_size"),
    ("postgres", "SELECT " + " || ".join(["u.name"] * 11) + " AS y FROM users AS u", "string_size"),
    ("postgres", "WITH RECURSIVE r(a, b, n) AS (SELECT 'x', 'y', 1 UNION ALL SELECT r.a || r.b, r.a || r.b, r.n + 1 "
                 "FROM r WHERE r.n < 40) SELECT length(r.a) AS l FROM r", "string_size"),
    ("postgres", "WITH RECURSIVE r(s, n) AS (SELECT 'x', 1 UNION ALL SELECT repeat(r.s, 2), r.n + 1 FROM r "
                 "WHERE r.n < 40) SELECT length(r.s) AS l FROM r", "string_size"),
    ("sqlite", "WITH RECURSIVE r(s, n) AS (SELECT 'x', 1 UNION ALL SELECT printf('%s%s', r.s, r.s), r.n + 1 "
               "FROM r WHERE r.n < 40) SELECT length(r.s) AS l FROM r", "string_size"),
]


@pytest.mark.parametrize("dialect, query", ACCEPTED)
def test_legitimate_patterns_and_strings_are_accepted(dialect: str, query: str) -> None:
    check(query, dialect)


@pytest.mark.parametrize("dialect, query, code", REFUSED)
def test_unbounded_patterns_and_strings_are_refused(dialect: str, query: str, code: str) -> None:
    refused(query, dialect, code=code)


@pytest.mark.parametrize("dialect, query", [
    ("sqlite", "SELECT u.id FROM users AS u WHERE u.name REGEXP <p>"),
    ("sqlite", "SELECT u.id FROM users AS u WHERE u.name LIKE <p>"),
    ("postgres", "SELECT u.id FROM users AS u WHERE u.name ~ <p>"),
    ("postgres", "SELECT u.id FROM users AS u WHERE u.name LIKE ANY (<p>)"),
    ("mysql", "SELECT u.id FROM users AS u WHERE u.name LIKE <p>"),
])
def test_patterns_from_earlier_steps_are_refused(dialect: str, query: str) -> None:
    refused(query, dialect, p=["%a%"], code="pattern")


@pytest.mark.parametrize("code", ["pattern", "string_size"])
def test_limit_codes_are_listed_and_documented(code: str) -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "refusal-codes.md").read_text(encoding="utf-8")
    assert code in CODES and f"`{code}`" in page


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.integers(min_value=1, max_value=1000), min_size=1, max_size=4))
def test_nested_repeats_of_data_are_accepted_exactly_when_their_product_is_small(counts: list[int]) -> None:
    """Growth multiplies through nesting: accepted iff the counts multiply to at most MAX_GROWTH."""
    expression = "u.name"
    for count in counts:
        expression = f"repeat({expression}, {count})"
    product = 1
    for count in counts:
        product *= count
    query = f"SELECT {expression} AS r FROM users AS u"
    if product <= MAX_GROWTH:
        check(query, "postgres")
    else:
        refused(query, "postgres", code="string_size")


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.integers(min_value=1, max_value=1000), min_size=1, max_size=3),
       text=st.text(alphabet="ab", min_size=1, max_size=20))
def test_constant_strings_are_accepted_exactly_when_short(counts: list[int], text: str) -> None:
    """A string built from literals alone is bounded by its exact size, not by a growth factor."""
    expression, size = f"'{text}'", len(text)
    for count in counts:
        expression, size = f"repeat({expression}, {count})", size * count
    query = f"SELECT {expression} AS r FROM users AS u"
    if size <= MAX_CONSTANT_CHARS:
        check(query, "postgres")
    else:
        refused(query, "postgres", code="string_size")
