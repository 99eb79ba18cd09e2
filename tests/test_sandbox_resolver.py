"""The column resolver (``safety/sql/resolve.py``) against ``qualify_columns``, query by query.

The resolver is the fast path of ``check_columns``; ``qualify_columns`` is the full path it
defers to on anything it does not model. For the sandbox to refuse exactly what it refused
before the resolver learnt a shape, both paths must agree on every query:

- the outcome: accepted (with the same SQL, parameters, names and read columns) or refused
  with the same code, whether or not the fast path was taken;
- the resolution: when the fast path resolves a query, each qualified column maps to the same
  manifest table as on the full path.

Checked over every query of the third-party corpora — legit gold queries and hostile
statements (``../shared/corpora``; skipped where absent) — and over generated queries built
from the shapes the resolver models and the ones it defers: GROUP BY / HAVING / ORDER BY
references to the select list by name and by position, CTEs, derived tables, set operations,
uncorrelated and correlated subqueries (in WHERE and as select items), USING joins over two
and three sources, recursive CTEs (with column lists or not), DISTINCT ON, FROM DUAL, names shared by a table and an output, denied columns and
a row filter. The full path is forced by making the resolver give up.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from corpora import LEGIT_LOADERS, hostile_manifest, load_hostile, quiet_sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sandbox_support import manifest

import structq.safety.sql as sandbox
from structq.capabilities import Manifest
from structq.errors import PlanError, SandboxViolation
from structq.safety.sql import columns as columns_pass
from structq.safety.sql import memo
from structq.safety.sql.resolve import Unsupported

_NONCE = re.compile(r"sq[0-9a-f]{12}_")
#: A quoted name that means the same unquoted on every dialect here: ``qualify_columns``
#: quotes a qualifier when its column needs quotes (``"c"."1"``), the resolver does not.
_NEEDLESS_QUOTES = re.compile(r'(["`])([a-z_][a-z0-9_]*)\1')


def _text(sql: str) -> str:
    return _NEEDLESS_QUOTES.sub(r"\2", _NONCE.sub("", sql))


@contextmanager
def _full_path() -> Iterator[None]:
    """Every query takes ``qualify_columns``: the resolver gives up at once."""

    def give_up(*args: Any, **kwargs: Any) -> None:
        raise Unsupported("forced full path")

    with mock.patch.object(columns_pass, "resolve_columns", give_up):
        yield


def _outcome(sql: str, source: Manifest, vars: dict[str, Any]) -> tuple[Any, ...]:
    """What ``check_sql`` makes of ``sql``, and how ``check_columns`` resolved its columns:
    ``("refused", code)`` or ``("accepted", sql, params, names, tables, columns, fast,
    resolution)``, where ``resolution`` lists (column as written after qualification, table)."""
    seen: dict[str, Any] = {}
    real = columns_pass.resolve_columns
    memo.clear()  # a remembered check would skip the passes this compares

    def spy(*args: Any, **kwargs: Any) -> Any:
        try:
            found = real(*args, **kwargs)
        except Unsupported:
            seen["fast"] = False
            raise
        seen["fast"] = True
        return found

    def check_columns(check: sandbox.Check) -> None:
        columns_pass.check_columns(check)
        # Every column mapped to a table is one of the tree's (a detached copy would be
        # respelled and counted while the tree kept the column as written).
        assert all(column.root() is check.tree for column, _ in check.column_tables.values()), sql
        seen["resolution"] = sorted(
            (column.sql(check.dialect), table.name) for column, table in check.column_tables.values()
        )

    rules = tuple(check_columns if rule is columns_pass.check_columns else rule for rule in sandbox.RULES)
    resolve = spy if columns_pass.resolve_columns is real else columns_pass.resolve_columns
    try:
        with mock.patch.object(sandbox, "RULES", rules), mock.patch.object(columns_pass, "resolve_columns", resolve):
            safe = sandbox.check_sql(sql, source, vars=vars)
    except SandboxViolation as violation:
        return ("refused", violation.code)
    except PlanError:
        return ("refused", "plan_error")
    params = {_NONCE.sub("", k): v for k, v in safe.params.items()}
    return ("accepted", _text(safe.text), params, safe.names, safe.tables, safe.columns,
            seen.get("fast", False), seen.get("resolution"))


def assert_paths_agree(sql: str, source: Manifest, vars: dict[str, Any] | None = None) -> bool:
    """Both paths give the same outcome (and resolution); True when the fast path resolved it."""
    vars = vars or {}
    normal = _outcome(sql, source, vars)
    with _full_path():
        full = _outcome(sql, source, vars)
    if normal[0] == "accepted" and full[0] == "accepted":
        fast = normal[6]
        assert normal[:6] == full[:6], f"{source.sql_dialect}: {sql}"
        if fast:
            assert normal[7] == full[7], f"resolution differs ({source.sql_dialect}): {sql}"
        return fast
    assert normal == full, f"{source.sql_dialect}: {sql}"
    return False


# ============================================================================================
# The corpora
# ============================================================================================


@pytest.mark.parametrize("corpus", sorted(LEGIT_LOADERS))
def test_paths_agree_on_legit_corpus(corpus: str, shared_corpora: Path) -> None:
    quiet_sqlglot()
    loaded = LEGIT_LOADERS[corpus](shared_corpora)
    fast = sum(assert_paths_agree(query.sql, loaded.manifest_for(query)) for query in loaded.queries)
    # The resolver must take most of a real corpus, or the comparison above says little.
    assert fast >= 0.9 * len(loaded.queries), f"{fast} of {len(loaded.queries)} resolved by the fast path"


def test_paths_agree_on_hostile_corpus(shared_corpora: Path) -> None:
    quiet_sqlglot()
    manifests = {dialect: hostile_manifest(dialect) for dialect in ("sqlite", "postgres", "mysql")}
    for statement in load_hostile(shared_corpora):
        if statement.dialect in manifests:
            assert_paths_agree(statement.sql, manifests[statement.dialect])


# ============================================================================================
# Generated shapes
# ============================================================================================

DIALECTS = ("sqlite", "postgres", "mysql")
MANIFESTS = {dialect: manifest(dialect) for dialect in DIALECTS}
VARS = {"tenant_id": 7}
#: Table and alias pairs of the shared test manifest (``employees`` has a row filter and a
#: denied column), and names that are columns of several tables, of one, of none, or tables.
SOURCES = [("employees", "e"), ("departments", "d"), ("employee_performance", "p"), ("project_members", "m")]
NAMES = ["employee_id", "dept_id", "name", "title", "budget", "salary", "performance_grade", "note",
         "month", "total", "e", "d", "employees", "x"]

name = st.sampled_from(NAMES)


COLUMNS = {alias: [c.name for c in MANIFESTS["sqlite"].table(table).columns] for table, alias in SOURCES}


@st.composite
def expression(draw: Callable[..., Any], aliases: list[str]) -> str:
    """A column of one of the select's sources (mostly), or a name that may be anything."""
    alias = draw(st.sampled_from(aliases))
    column = draw(st.sampled_from(COLUMNS[alias])) if draw(st.integers(0, 3)) else draw(name)
    if draw(st.booleans()):
        column = alias + "." + column
    return draw(st.sampled_from([
        "{}", "UPPER({})", "COUNT({})", "SUM({})", "{} + 1", "CASE WHEN {} IS NULL THEN 1 ELSE 0 END",
        "COUNT(*)", "1", "'k'",
    ])).format(column)


@st.composite
def select(draw: Callable[..., Any], depth: int = 0) -> str:
    chosen = draw(st.lists(st.sampled_from(SOURCES), min_size=1, max_size=2, unique_by=lambda s: s[0]))
    aliases = [alias for _, alias in chosen]
    items = []
    for _ in range(draw(st.integers(1, 3))):
        item = draw(st.one_of(expression(aliases), st.sampled_from(["*", aliases[0] + ".*"])))
        if depth < 1 and not draw(st.integers(0, 5)):
            item = f"({draw(select(depth + 1))})"  # a scalar subquery, uncorrelated or not
        if item not in ("*", aliases[0] + ".*") and draw(st.booleans()):
            item += " AS " + draw(name)
        items.append(item)
    parts = ["SELECT", ", ".join(items), "FROM", chosen[0][0], chosen[0][1]]
    if len(chosen) == 2:
        on = draw(st.sampled_from(["ON {0}.employee_id = {1}.employee_id", "ON {0}.dept_id = {1}.dept_id",
                                   "USING (employee_id)", "USING (dept_id)", "USING (employee_id, dept_id)",
                                   "ON dept_id = 1"]))
        side = draw(st.sampled_from(["", "LEFT ", "INNER "]))
        parts += [side + "JOIN", chosen[1][0], chosen[1][1], on.format(*aliases)]
        if draw(st.integers(0, 3)) == 0:
            # A third source joined on a column the first two may share: USING over three.
            third = draw(st.sampled_from([s for s in SOURCES if s not in chosen]))
            aliases.append(third[1])
            parts += ["JOIN", third[0], third[1], draw(st.sampled_from([
                "USING (employee_id)", "USING (dept_id)", "ON {0}.employee_id = {1}.employee_id".format(
                    aliases[0], third[1])]))]
    if draw(st.booleans()):
        where = draw(expression(aliases)) + " IS NOT NULL"
        if depth < 1 and draw(st.booleans()):
            inner = draw(select(depth + 1))
            where = draw(st.sampled_from([f"EXISTS ({inner})", f"{aliases[0]}.employee_id IN ({inner})",
                                          f"NOT {aliases[0]}.dept_id IN ({inner})", f"({inner}) > 1"]))
        parts += ["WHERE", where]
    if draw(st.booleans()):
        group = [draw(st.one_of(expression(aliases), name, st.sampled_from(["1", "2", "4"])))]
        parts += ["GROUP BY", ", ".join(group)]
        if draw(st.booleans()):
            parts += ["HAVING", draw(st.one_of(expression(aliases), name)) + " > 1"]
    if draw(st.booleans()):
        parts += ["ORDER BY", draw(st.one_of(expression(aliases), name, st.sampled_from(["1", "2", "3"])))]
    return " ".join(parts)


@st.composite
def query(draw: Callable[..., Any]) -> str:
    body = draw(select())
    shape = draw(st.sampled_from(["plain", "cte", "derived", "union", "recursive"]))
    if shape == "cte":
        return f"WITH c AS ({body}) SELECT " + draw(st.sampled_from(["*", "c.*", draw(name)])) + " FROM c"
    if shape == "recursive":
        # A recursive CTE (a column list or not), read by its later part and by the query.
        columns = draw(st.sampled_from(["", "(x)", "(x, y)"]))
        step = ", ".join(draw(st.lists(name, min_size=1, max_size=2)))
        where = draw(st.sampled_from(["", " WHERE x < 3", " WHERE r.x IS NULL", f" WHERE {draw(name)} > 1"]))
        outer = draw(st.sampled_from(["*", "r.*", draw(name), "r." + draw(name)]))
        return f"WITH RECURSIVE r{columns} AS ({body} UNION ALL SELECT {step} FROM r{where}) SELECT {outer} FROM r"
    if shape == "derived":
        outer = draw(st.sampled_from(["*", "s." + draw(name), draw(name)]))
        return f"SELECT {outer} FROM ({body}) AS s" + draw(st.sampled_from(["", " ORDER BY 1", " GROUP BY 1"]))
    if shape == "union":
        operations = draw(st.lists(st.sampled_from(["UNION", "UNION ALL", "INTERSECT", "EXCEPT"]), min_size=1,
                                   max_size=2))
        for operation in operations:
            body += f" {operation} {draw(select())}"
        return body + draw(st.sampled_from(["", " ORDER BY 1", " ORDER BY 2 DESC"]))
    return body


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query(), st.sampled_from(DIALECTS))
def test_paths_agree_on_generated_queries(sql: str, dialect: str) -> None:
    assert_paths_agree(sql, MANIFESTS[dialect], VARS)


#: Shapes of references to the select list: resolved by the fast path (True) or left to
#: ``qualify_columns`` (False). Either way both paths must agree.
SHAPES = [
    # GROUP BY an output name no table has, by position, HAVING and ORDER BY names.
    ("SELECT UPPER(e.name) AS month, COUNT(*) FROM employees e GROUP BY month ORDER BY month", True),
    ("SELECT e.dept_id, COUNT(*) AS total FROM employees e GROUP BY 1 HAVING COUNT(e.name) > 1 ORDER BY 2 DESC", True),
    (("SELECT e.dept_id AS x, SUM(e.dept_id) AS total FROM employees e GROUP BY e.dept_id "
      "ORDER BY CASE WHEN total IS NULL THEN 1 ELSE 0 END"), True),
    (("WITH c AS (SELECT UPPER(e.name) AS month, COUNT(*) AS n FROM employees e GROUP BY month) "
      "SELECT month, n FROM c ORDER BY n DESC"), True),
    ("SELECT d.title, COUNT(*) FROM departments d GROUP BY d.title HAVING avg(budget) > 1", True),
    # A name an output and a table share, inside an ORDER BY expression: a whole row on PostgreSQL.
    ("SELECT e.name AS e FROM employees e ORDER BY e || 'x'", False),
    # HAVING names: an alias no source has becomes a copy of its expression; a name only an
    # unaliased column output has is the source's column.
    ("SELECT e.dept_id AS dept_id, COUNT(*) AS n FROM employees e GROUP BY e.dept_id HAVING n > 1", True),
    ("SELECT p.employee_id, COUNT(*) AS n FROM employee_performance p GROUP BY p.employee_id HAVING n > 1 AND n < 9",
     True),
    ("SELECT dept_id FROM employees GROUP BY dept_id HAVING COUNT(dept_id) > 1", True),
    (("SELECT e.name FROM employees e WHERE e.dept_id IN (SELECT dept_id FROM departments GROUP BY dept_id "
      "HAVING COUNT(dept_id) > 1)"), True),
    ("SELECT d.title, SUM(d.budget) + 1 AS total FROM departments d GROUP BY d.title HAVING total > 1", True),
    # A denied column behind the name, an ambiguous one: refused either way.
    ("SELECT e.dept_id, SUM(salary) AS n FROM employees e GROUP BY e.dept_id HAVING n > 1", False),
    ("SELECT salary FROM employees GROUP BY salary HAVING COUNT(salary) > 1", False),
    (("SELECT e.name, COUNT(*) AS n FROM employees e JOIN departments d ON e.dept_id = d.dept_id "
      "GROUP BY e.name HAVING dept_id > 1"), False),
    # A name both an alias and a source's column has (dialect flags decide: MySQL's differ), a
    # name under a star, a constant's alias, an aggregate's alias inside an aggregate.
    ("SELECT e.name AS dept_id, COUNT(*) AS n FROM employees e GROUP BY e.name HAVING dept_id > 1", False),
    ("SELECT * FROM departments d GROUP BY d.dept_id, d.title, d.budget HAVING title > 'a'", False),
    ("SELECT d.title, 1 AS k FROM departments d GROUP BY d.title HAVING k > 0", False),
    ("SELECT d.title, COUNT(*) AS n FROM departments d GROUP BY d.title HAVING MAX(n) > 1", False),
    # An aggregate output named in GROUP BY; a position out of range; an output name in WHERE.
    ("SELECT COUNT(*) AS month FROM employees e GROUP BY month", False),
    ("SELECT e.name FROM employees e GROUP BY 3", False),
    ("SELECT e.name AS x FROM employees e WHERE x = 'a'", False),
    # USING joins: an ON condition over the allowed columns, COALESCE for an unqualified name.
    ("SELECT e.name, p.performance_grade FROM employees e JOIN employee_performance p USING (employee_id)", True),
    (("SELECT employee_id, e.name FROM employees e LEFT JOIN employee_performance p USING (employee_id) "
      "WHERE employee_id > 'a' GROUP BY employee_id, e.name ORDER BY employee_id"), True),
    ("SELECT dept_id, COUNT(*) FROM employees e JOIN departments d USING (dept_id) GROUP BY 1 ORDER BY 1", True),
    (("SELECT employee_id, UPPER(note) FROM employees e JOIN employee_performance p USING (employee_id) "
      "JOIN project_members m USING (employee_id) ORDER BY UPPER(employee_id)"), True),
    (("SELECT e.name FROM employees e JOIN departments d USING (dept_id) JOIN employees e2 USING (dept_id, name) "
      "WHERE EXISTS (SELECT 1 FROM project_members m WHERE m.employee_id = e2.employee_id)"), True),
    (("WITH c AS (SELECT d.dept_id, COUNT(*) AS n FROM departments d GROUP BY d.dept_id) "
      "SELECT c.dept_id, e.name, c.n FROM c JOIN employees e USING (dept_id) ORDER BY c.n DESC"), True),
    (("SELECT s.dept_id FROM (SELECT dept_id, e.name FROM employees e JOIN departments d USING (dept_id)) AS s "
      "JOIN departments d USING (dept_id)"), True),
    # A denied, unknown or one-sided USING column, an ambiguous other name, a star, HAVING.
    ("SELECT e.name FROM employees e JOIN employees f USING (salary)", False),
    ("SELECT e.name FROM employees e JOIN departments d USING (title)", False),
    ("SELECT e.name FROM employees e JOIN project_members m USING (employee_id) JOIN employees f USING (note)", False),
    ("SELECT name FROM employees e JOIN employees f USING (dept_id)", False),
    ("SELECT * FROM employees e JOIN departments d USING (dept_id)", False),
    ("SELECT d.*, e.name FROM employees e JOIN departments d USING (dept_id)", False),
    ("SELECT COUNT(*) FROM employees e JOIN departments d USING (dept_id) GROUP BY e.dept_id HAVING dept_id > 1",
     False),
    ("SELECT e.name FROM employees e JOIN departments d USING (dept_id) JOIN project_members m USING (dept_id)",
     False),
    # Recursive CTEs: a reference from the later part reads the first part's names, a column
    # list renames every part's outputs; a reference from the first part, a renamed select with
    # ORDER BY, a select alias copied inside, a column list without RECURSIVE: the full path.
    ("WITH RECURSIVE r(x) AS (SELECT e.salary FROM employees e UNION ALL SELECT x FROM r) SELECT x FROM r", False),
    ("WITH RECURSIVE r(x) AS (SELECT e.name AS q FROM employees e UNION ALL SELECT q FROM r) SELECT x FROM r", False),
    ("WITH RECURSIVE r(x) AS (SELECT e.name FROM employees e UNION ALL SELECT x FROM r) SELECT name FROM r", False),
    ("WITH RECURSIVE r AS (SELECT e.name FROM r JOIN employees e ON 1 = 1 UNION ALL SELECT 'a') SELECT * FROM r",
     False),
    (("WITH RECURSIVE r(x) AS (SELECT e.name FROM employees e UNION ALL SELECT x FROM r WHERE x > 'a' "
      "ORDER BY 1) SELECT x FROM r"), True),  # the set operation's ORDER BY
    (("WITH RECURSIVE r(x) AS (SELECT e.name FROM employees e UNION ALL SELECT x FROM r WHERE x > 'a' "
      "UNION SELECT d.title FROM departments d GROUP BY d.title) SELECT x FROM r"), False),
    (("WITH RECURSIVE r AS (SELECT e.dept_id AS k FROM employees e UNION ALL SELECT d.budget AS k FROM r "
      "JOIN departments d ON d.dept_id = r.k GROUP BY k) SELECT k FROM r"), True),  # r's column k
    (("WITH RECURSIVE r AS (SELECT e.dept_id AS k FROM employees e UNION ALL SELECT UPPER(d.title) AS kk FROM r "
      "JOIN departments d ON d.dept_id = r.k GROUP BY kk) SELECT k FROM r"), False),
    ("WITH c(x) AS (SELECT e.name FROM employees e) SELECT x FROM c", False),
    # A derived table with two columns of one name; a union's position naming a repeated output.
    (("WITH c AS (SELECT * FROM employees e JOIN employee_performance p ON e.employee_id = p.employee_id) "
      "SELECT * FROM c"), False),
    ("SELECT e.employee_id, e.employee_id FROM employees e UNION SELECT e.name, e.name FROM employees e ORDER BY 1",
     True),
    # An unaliased scalar subquery named by a position (of its select's ORDER BY or GROUP BY,
    # or of a set operation's ORDER BY): ``qualify_columns`` fails there, the full path refuses.
    ("SELECT (SELECT MAX(d.budget) FROM departments d), e.name FROM employees e ORDER BY 1", False),
    ("SELECT e.name, (SELECT MAX(d.budget) FROM departments d) FROM employees e GROUP BY 2", False),
    ("SELECT (SELECT MAX(d.budget) FROM departments d) FROM employees e UNION SELECT d.budget FROM departments d "
     "ORDER BY 1", False),
    (("SELECT e.name, (SELECT MAX(d.budget) FROM departments d) FROM employees e UNION SELECT d.title, d.budget "
      "FROM departments d UNION SELECT p.employee_id, 1 FROM employee_performance p ORDER BY 2"), False),
    # Where nothing names it by position: the fast path, whatever the other clauses.
    ("SELECT (SELECT MAX(d.budget) FROM departments d) FROM employees e GROUP BY e.name", True),
    (("SELECT e.name, (SELECT MAX(d.budget) FROM departments d) FROM employees e WHERE e.dept_id = "
      "(SELECT d.dept_id FROM departments d ORDER BY d.budget LIMIT 1) ORDER BY e.dept_id DESC, 1 LIMIT 1"), True),
    (("SELECT e.name, (SELECT MAX(d.budget) FROM departments d) FROM employees e GROUP BY e.name "
      "HAVING COUNT(*) > 1 ORDER BY (SELECT MAX(d.budget) FROM departments d)"), True),
    ("SELECT e.name, (SELECT MAX(d.budget) FROM departments d) FROM employees e GROUP BY 1 ORDER BY _col_1", False),
    (("SELECT e.name, (SELECT MAX(d.budget) FROM departments d) FROM employees e UNION SELECT d.title, d.budget "
      "FROM departments d ORDER BY 1"), True),
    (("SELECT d.title, d.budget FROM departments d UNION SELECT e.name, (SELECT MAX(d.budget) FROM departments d) "
      "FROM employees e ORDER BY 2"), True),
    ("SELECT e.name, (SELECT MAX(d.salary) FROM employees d) FROM employees e ORDER BY e.name", False),
    ("SELECT DISTINCT (SELECT MAX(d.budget) FROM departments d) FROM employees e", True),
    ("SELECT s._col_0 FROM (SELECT (SELECT MAX(d.budget) FROM departments d), e.name FROM employees e) AS s "
     "WHERE s._col_0 > 1 ORDER BY s._col_0", True),
    ("SELECT * FROM (SELECT (SELECT MAX(d.budget) FROM departments d) FROM employees e) AS s ORDER BY 1", True),
]


#: Shapes of one dialect: (dialect, query, resolved by the fast path).
DIALECT_SHAPES = [
    # PostgreSQL's DISTINCT ON over plain expressions of source columns: the fast path.
    ("postgres", "SELECT DISTINCT ON (e.dept_id) e.name FROM employees e ORDER BY e.dept_id, e.name", True),
    ("postgres", "SELECT DISTINCT ON (dept_id) name FROM employees ORDER BY dept_id", True),
    ("postgres", ("SELECT DISTINCT ON (UPPER(e.name), d.title) e.name FROM employees e "
                  "JOIN departments d ON e.dept_id = d.dept_id ORDER BY UPPER(e.name)"), True),
    # A select alias, a position, a GROUP BY, a denied or ambiguous column, a whole row.
    ("postgres", "SELECT DISTINCT ON (dept_id) e.dept_id, e.name FROM employees e ORDER BY dept_id", False),
    ("postgres", "SELECT DISTINCT ON (1) e.dept_id FROM employees e", False),
    ("postgres", "SELECT DISTINCT ON (e.dept_id) e.name FROM employees e GROUP BY e.dept_id, e.name", False),
    ("postgres", "SELECT DISTINCT ON (salary) e.name FROM employees e", False),
    ("postgres", "SELECT DISTINCT ON (e.salary) e.name FROM employees e", False),
    ("postgres", "SELECT DISTINCT ON (dept_id) e.name FROM employees e JOIN departments d ON e.dept_id = d.dept_id",
     False),
    ("postgres", "SELECT DISTINCT ON (e) e.name FROM employees e", False),
    # MySQL's FROM DUAL: a source of no columns, where no clause can name a select alias.
    ("mysql", "SELECT (SELECT SUM(d.budget) FROM departments d) / (SELECT COUNT(*) FROM employees) AS r FROM dual",
     True),
    ("mysql", "SELECT 1 AS x FROM dual WHERE EXISTS (SELECT 1 FROM employees e WHERE e.dept_id = 1) ORDER BY x", True),
    ("mysql", "SELECT 1 AS x FROM dual WHERE EXISTS (SELECT 1 FROM employees e WHERE e.salary = 1)", False),
    ("mysql", "SELECT x FROM dual", False),
    ("mysql", "SELECT dual.x FROM dual", False),
    ("mysql", "SELECT * FROM dual", False),
    ("mysql", "SELECT COUNT(*) AS n FROM dual GROUP BY n", False),
    ("mysql", "SELECT COUNT(*) AS n FROM dual HAVING n > 0", False),
    ("mysql", "SELECT (SELECT e.name FROM dual) AS n FROM employees e", True),
    ("mysql", "SELECT (SELECT name FROM dual) AS n FROM employees e", False),
    ("mysql", "SELECT 1 AS x FROM dual JOIN departments d ON d.dept_id = 1", False),
]


@pytest.mark.parametrize(("dialect", "sql", "fast"), DIALECT_SHAPES)
def test_shapes_of_one_dialect(dialect: str, sql: str, fast: bool) -> None:
    assert assert_paths_agree(sql, MANIFESTS[dialect], VARS) is fast


#: Flat queries (``flat.py``): planned without sqlglot's scopes.
FLAT = [
    "SELECT e.name FROM employees e WHERE NOT e.dept_id IN (SELECT d.dept_id FROM departments d)",
    "SELECT name FROM employees EXCEPT SELECT title FROM departments",
    "SELECT title FROM departments INTERSECT SELECT title FROM departments UNION SELECT name FROM employees ORDER BY 1",
    "SELECT (SELECT MAX(budget) FROM departments) - (SELECT MIN(d.budget) FROM departments d) AS spread",
    "SELECT e.name, (SELECT COUNT(*) FROM departments) AS n FROM employees e WHERE e.dept_id = (SELECT MAX(dept_id) FROM departments)",
    # Correlated: a qualified column names a source of an enclosing select.
    "SELECT e.name FROM employees e WHERE EXISTS (SELECT 1 FROM departments d WHERE d.dept_id = e.dept_id)",
    "SELECT e.name, (SELECT MAX(d.budget) FROM departments d WHERE d.dept_id = e.dept_id) AS b FROM employees e",
    ("SELECT e.name FROM employees e WHERE e.dept_id IN (SELECT d.dept_id FROM departments d WHERE d.title = e.name "
     "UNION SELECT p.employee_id FROM employee_performance p WHERE p.employee_id = e.employee_id)"),
    ("SELECT e.name FROM employees e WHERE EXISTS (SELECT 1 FROM departments d WHERE d.dept_id = e.dept_id "
     "AND EXISTS (SELECT 1 FROM employees e WHERE e.dept_id = d.dept_id))"),
    "SELECT d.title FROM departments d GROUP BY d.title HAVING COUNT(*) > (SELECT COUNT(*) FROM employees e WHERE e.name = d.title)",
    # Derived tables and CTEs: their columns are their queries' output names.
    "SELECT s.name FROM (SELECT e.name FROM employees e) AS s",
    "SELECT * FROM (SELECT e.name, COUNT(*) AS n FROM employees e GROUP BY e.name) AS s ORDER BY 2",
    "WITH c AS (SELECT e.name FROM employees e) SELECT c.name FROM c WHERE EXISTS (SELECT 1 FROM departments d WHERE d.title = c.name)",
    ("WITH a AS (SELECT e.dept_id AS k FROM employees e), b AS (SELECT a.k FROM a JOIN departments d ON d.dept_id = a.k) "
     "SELECT b.k, s.title FROM b JOIN (SELECT d.dept_id, d.title FROM departments d) AS s ON s.dept_id = b.k"),
    "WITH c AS (SELECT title FROM departments UNION SELECT name FROM employees) SELECT title FROM c ORDER BY title",
    # Recursive CTEs (``recursive.py``).
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r",
    ("WITH RECURSIVE r AS (SELECT MIN(d.budget) AS b FROM departments d UNION ALL SELECT b + 1 FROM r "
     "WHERE b < (SELECT MAX(d.budget) FROM departments d)), t AS (SELECT d.budget AS b, COUNT(*) AS n "
     "FROM departments d GROUP BY d.budget) SELECT r.b, t.n FROM r LEFT JOIN t ON r.b = t.b ORDER BY r.b"),
    ("WITH RECURSIVE r(x, y) AS (SELECT e.name, e.dept_id FROM employees e UNION ALL SELECT x, y + 1 FROM r "
     "WHERE y < 3) SELECT * FROM r"),
    ("WITH RECURSIVE r(x) AS (SELECT e.name AS q FROM employees e UNION ALL SELECT r.x FROM r "
     "WHERE EXISTS (SELECT 1 FROM r AS s WHERE s.x = r.x)) SELECT r.x FROM r"),
    # Unaliased scalar subqueries in a select list: named ``_col_<n>`` by an alias of their own.
    "SELECT (SELECT MAX(d.budget) FROM departments d), e.name FROM employees e WHERE e.name IS NOT NULL",
    "SELECT s._col_0 FROM (SELECT (SELECT COUNT(*) FROM departments d) FROM employees e) AS s",
    "WITH c AS (SELECT e.name, (SELECT MIN(d.title) FROM departments d) FROM employees e) SELECT * FROM c",
]
#: Not flat: planned over scopes (and still resolved by the fast path).
OVER_SCOPES = [
    "SELECT e.name FROM employees e UNION (SELECT d.title FROM departments d)",
]


@contextmanager
def _calls(name: str) -> Iterator[list[Any]]:
    """``resolve.<name>`` spied on: what each call returned, in order."""
    from structq.safety.sql import resolve

    returned: list[Any] = []
    real = getattr(resolve, name)

    def spy(*args: Any) -> Any:
        returned.append(real(*args))
        return returned[-1]

    with mock.patch.object(resolve, name, spy):
        yield returned


@pytest.mark.parametrize("sql", FLAT + OVER_SCOPES)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_flat_queries_are_planned_without_scopes(sql: str, dialect: str) -> None:
    with _calls("traverse_scope") as scoped:
        assert assert_paths_agree(sql, MANIFESTS[dialect], VARS)
    assert bool(scoped) is (sql in OVER_SCOPES)


@pytest.mark.parametrize(("sql", "fast"), SHAPES)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_references_to_the_select_list(sql: str, fast: bool, dialect: str) -> None:
    assert assert_paths_agree(sql, MANIFESTS[dialect], VARS) is fast


@pytest.mark.parametrize("dialect", DIALECTS)
def test_what_qualify_columns_cannot_handle_is_refused(dialect: str) -> None:
    """A star over a derived table with two columns of one name, then a position: sqlglot's
    ``qualify_columns`` fails an assertion there; the sandbox refuses instead of crashing."""
    sql = "SELECT * FROM (SELECT e.name, e.name FROM employees e) AS s ORDER BY 1"
    assert _outcome(sql, MANIFESTS[dialect], VARS) == ("refused", "unsupported")


#: Queries with a select over one declared table (``one_table.py``): planned in one pass.
ONE_TABLE = [
    "SELECT COUNT(*) FROM departments",
    "SELECT title, budget FROM departments WHERE budget > 10 ORDER BY budget DESC LIMIT 3",
    "SELECT d.title FROM departments AS d WHERE d.budget BETWEEN 1 AND 9 ORDER BY d.title",
    "SELECT departments.title FROM departments ORDER BY title",
    "SELECT DISTINCT title AS t FROM departments ORDER BY t, budget",
    "SELECT MAX(budget) AS budget FROM departments ORDER BY budget",
    "SELECT title || 'x' AS dept_id, dept_id FROM departments ORDER BY dept_id",
    "SELECT title FROM departments WHERE title LIKE '%a%' ORDER BY LENGTH(budget)",
    "SELECT budget FROM departments ORDER BY budget LIMIT 2 OFFSET 1",
    "SELECT name FROM employees WHERE dept_id = 1",  # a row filter: confined after resolution
    "SELECT * FROM departments",
    "SELECT d.*, d.budget * 2 AS twice FROM departments d ORDER BY twice",
    "SELECT *, title FROM departments ORDER BY budget",
    "SELECT COUNT(*) FROM employees",
    "SELECT title, COUNT(*) FROM departments GROUP BY title ORDER BY COUNT(*) DESC LIMIT 1",
    "SELECT d.budget AS title, MAX(d.title) FROM departments d GROUP BY d.budget, title ORDER BY title",
    "SELECT UPPER(title) AS t, COUNT(*) AS n FROM departments GROUP BY UPPER(title) ORDER BY n",
    # Selects of a larger query: branches, subqueries, derived tables' and CTEs' queries.
    "SELECT title FROM departments UNION SELECT name FROM employees",
    "SELECT title FROM departments WHERE dept_id IN (SELECT dept_id FROM employees)",
    "SELECT s.t FROM (SELECT title AS t FROM departments ORDER BY t) AS s",
    "WITH c AS (SELECT d.title FROM departments d) SELECT c.title FROM c",
    # The outer select (whose table a correlated column names) in one pass, the inner one not.
    "SELECT d.title FROM departments d WHERE EXISTS (SELECT 1 FROM employees e WHERE e.dept_id = d.dept_id)",
    "SELECT d.title FROM departments d WHERE d.budget > (SELECT MIN(d2.budget) FROM departments d2 WHERE d2.title = d.title)",
    "SELECT title, (SELECT MAX(budget) FROM departments) AS top FROM departments ORDER BY top",
    "SELECT title, RANK() OVER (ORDER BY title) FROM departments ORDER BY title",  # a window's ORDER BY
    "SELECT title FROM departments ORDER BY (SELECT MAX(budget) FROM departments)",
    # The inner select; the outer one, with a scalar subquery as an item, is the general planner's.
    "SELECT (SELECT MAX(budget) FROM departments), title FROM departments d ORDER BY 2",
]
#: Selects of one table, but shapes for the general planner (which resolves them too, or
#: gives up).
NOT_ONE_TABLE = [
    "SELECT departments.* FROM departments d",
    "SELECT title FROM departments ORDER BY 1",
    "SELECT title AS t FROM departments ORDER BY LOWER(t)",
    "SELECT title, COUNT(*) FROM departments GROUP BY 1",
    "SELECT UPPER(title) AS t, COUNT(*) FROM departments GROUP BY t",
    "SELECT title FROM departments GROUP BY title HAVING COUNT(*) > 1",
    "SELECT departments.title FROM departments AS d",
    "SELECT d.title FROM departments d JOIN employees e ON e.dept_id = d.dept_id",
    "SELECT nosuch FROM departments",
    "SELECT title FROM departments ORDER BY nosuch",
    "SELECT d.title FROM departments d, employees e",
    "SELECT title FROM (departments d JOIN employees e ON e.dept_id = d.dept_id)",
    # An output's name inside a subquery of ORDER BY (the general planner gives up there).
    "SELECT title AS t FROM departments ORDER BY (SELECT MAX(d.budget) FROM departments d WHERE d.title = t)",
    # A CTE column list renames outputs.
    "WITH RECURSIVE r(x) AS (SELECT d.budget FROM departments d UNION ALL SELECT x + 1 FROM r WHERE x < 3) SELECT x FROM r",
]


@pytest.mark.parametrize("sql", ONE_TABLE + NOT_ONE_TABLE)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_selects_over_one_table_are_planned_in_one_pass(sql: str, dialect: str) -> None:
    with _calls("plan_one_table") as planned:
        fast = assert_paths_agree(sql, MANIFESTS[dialect], VARS)
    assert any(planned) is (sql in ONE_TABLE), planned
    # Planned in one pass, and still resolved by the fast path as a whole (each declared table
    # counted once: ``resolve._FlatQuery.check_tables_read``).
    assert fast or sql not in ONE_TABLE
