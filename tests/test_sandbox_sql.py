"""The SQL sandbox: what it accepts, what it refuses (with which code, message and hint), and
that accepted rewrites run on a real SQLite database with the right rows.

Allow/deny tables in the style of datasette's ``test_validate_sql_select_bad/good``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import sandbox_support as support
import sqlglot
from sandbox_support import DIALECTS, database_engine, in_every_dialect, manifest
from sqlalchemy import bindparam, text

from structq.errors import PlanError, SandboxViolation
from structq.safety import SafeQuery, check_sql
from structq.safety.functions import UNRESOLVED

#: What the sandbox writes before each table of the test manifest (``schema: hr``): every
#: dialect but SQLite qualifies tables with the declared schema.
QUALIFIER = {"sqlite": "", "postgres": "hr.", "mysql": "hr."}
VARS = {"tenant_id": 7}


def check(query: str, dialect: str = "sqlite", **kw) -> SafeQuery:
    kw.setdefault("vars", VARS)
    return check_sql(query, manifest(dialect), **kw)


def refused(query: str, dialect: str = "sqlite", *, code: str, **kw: Any) -> SandboxViolation:
    """``query`` is refused by the rule ``code`` names (see ``sandbox_support.refused``), and
    like every SQL refusal it says what would be accepted."""
    error = support.refused(check, query, dialect, code=code, **kw)
    assert error.hint, "every violation says what would be accepted"
    return error


# ------------------------------------------------------------------------------------------
# Refusals, every dialect
# ------------------------------------------------------------------------------------------

BAD_EVERYWHERE = [
    # writes and DDL
    ("INSERT INTO departments VALUES (9, 'x', 1)", "write"),
    ("UPDATE departments SET budget = 0", "write"),
    ("DELETE FROM departments", "write"),
    ("DROP TABLE departments", "write"),
    ("CREATE TABLE x (a INT)", "write"),
    ("CREATE TABLE x AS SELECT * FROM departments", "write"),
    ("ALTER TABLE departments ADD COLUMN x INT", "write"),
    ("TRUNCATE TABLE departments", "write"),
    ("GRANT ALL ON departments TO bob", "write"),
    # stacked statements and hiding tricks
    ("SELECT 1; DROP TABLE departments", "multiple_statements"),
    ("SELECT 1 --\n; DROP TABLE departments", "multiple_statements"),
    ("SELECT 1 /* x */; DELETE FROM departments", "multiple_statements"),
    ("SELECT 1；DROP TABLE departments", "parse_error"),
    ("SELECT 1\u200b; DROP TABLE departments", "multiple_statements"),
    ("SELECT title AS \u200bx FROM departments", "parse_error"),
    ("", "parse_error"),
    ("SELECT FROM WHERE", "parse_error"),
    # INTO, transactions, settings
    ("SELECT * INTO x FROM departments", "write"),
    ("BEGIN", "not_a_query"),
    ("COMMIT", "not_a_query"),
    ("SET x = 1", "not_a_query"),
    # catalogs and qualified names
    ("SELECT * FROM information_schema.tables", "unknown_table"),
    ("SELECT * FROM sqlite_master", "unknown_table"),
    ("SELECT * FROM pg_catalog.pg_user", "unknown_table"),
    ("SELECT * FROM mysql.user", "unknown_table"),
    ("SELECT * FROM other.departments", "unknown_table"),
    # undeclared tables everywhere
    ("SELECT * FROM secrets", "unknown_table"),
    ("SELECT title FROM departments WHERE dept_id IN (SELECT dept_id FROM secrets)", "unknown_table"),
    ("SELECT title FROM departments UNION SELECT x FROM secrets", "unknown_table"),
    ("WITH a AS (SELECT * FROM secrets) SELECT * FROM a", "unknown_table"),
    # a CTE does not hide the real table of the same name inside its own body
    ("WITH secrets AS (SELECT * FROM secrets) SELECT * FROM secrets", "unknown_table"),
    # placeholders written by the model
    ("SELECT title FROM departments WHERE dept_id = :x", "placeholder"),
    ("SELECT title FROM departments WHERE dept_id = ?", "placeholder"),
    # functions
    ("SELECT evil.lower(title) FROM departments", "denied_function"),
    ("SELECT no_such_function(title) FROM departments", "denied_function"),
]


BAD_PER_DIALECT = [
    # postgres
    ("postgres", "WITH x AS (DELETE FROM departments RETURNING *) SELECT * FROM x", "write"),
    ("postgres", "SELECT * FROM (WITH x AS (UPDATE departments SET budget = 1 RETURNING *) SELECT * FROM x) y", "write"),
    ("postgres", "SELECT title FROM departments WHERE dept_id IN (WITH x AS (INSERT INTO departments VALUES (1) RETURNING dept_id) SELECT dept_id FROM x)", "write"),
    ("postgres", "SELECT title FROM departments FOR UPDATE", "locking"),
    ("postgres", "SELECT title FROM departments FOR SHARE", "locking"),
    ("postgres", "SELECT set_config('a', 'b', false)", "denied_function"),
    ("postgres", "SELECT current_setting('data_directory')", "denied_function"),
    ("postgres", "SELECT * FROM dblink('host=x', 'SELECT 1') AS t(a int)", "denied_function"),
    ("postgres", "SELECT dblink_exec('host=x', 'DROP TABLE departments')", "denied_function"),
    ("postgres", "SELECT pg_advisory_lock(1)", "denied_function"),
    ("postgres", "SELECT nextval('s')", "denied_function"),
    ("postgres", "SELECT setval('s', 1)", "denied_function"),
    ("postgres", "SELECT lo_export(1, '/tmp/x')", "denied_function"),
    ("postgres", "SELECT lo_import('/etc/passwd')", "denied_function"),
    ("postgres", "SELECT pg_read_file('/etc/passwd')", "denied_function"),
    ("postgres", "SELECT pg_ls_dir('.')", "denied_function"),
    ("postgres", "SELECT pg_sleep(10)", "denied_function"),
    ("postgres", "SELECT pg_catalog.pg_sleep(10)", "denied_function"),
    ("postgres", "SELECT version()", "denied_function"),
    ("postgres", "SELECT current_user", "denied_function"),
    ("postgres", "SELECT pg_backend_pid()", "denied_function"),
    ("postgres", "COPY departments TO '/tmp/x'", "write"),
    ("postgres", 'SELECT name FROM employees WHERE "salary" > 10', "denied_column"),
    ("postgres", "SELECT title FROM departments WHERE dept_id = $1", "placeholder"),
    ("postgres", "SELECT title FROM departments WHERE dept_id = %s", "placeholder"),
    ("postgres", "SELECT title FROM departments WHERE dept_id = %(x)s", "placeholder"),
    # mysql
    ("mysql", "SELECT SLEEP(5)", "denied_function"),
    ("mysql", "SELECT BENCHMARK(1000000, MD5('a'))", "denied_function"),
    ("mysql", "SELECT GET_LOCK('a', 1)", "denied_function"),
    ("mysql", "SELECT RELEASE_LOCK('a')", "denied_function"),
    ("mysql", "SELECT LOAD_FILE('/etc/passwd')", "denied_function"),
    ("mysql", "SELECT USER()", "denied_function"),
    ("mysql", "SELECT DATABASE()", "denied_function"),
    ("mysql", "SELECT @@version", "placeholder"),
    ("mysql", "SELECT title FROM departments LOCK IN SHARE MODE", "locking"),
    ("mysql", "SELECT title FROM departments INTO OUTFILE '/tmp/x'", "parse_error"),
    ("mysql", "SELECT title FROM departments INTO DUMPFILE '/tmp/x'", "parse_error"),
    ("mysql", "LOAD DATA INFILE '/tmp/x' INTO TABLE departments", "parse_error"),
    ("mysql", "REPLACE INTO departments VALUES (1, 'x', 1)", "unsupported"),
    # sqlite
    ("sqlite", "PRAGMA writable_schema = 1", "not_a_query"),
    ("sqlite", "PRAGMA table_info(departments)", "not_a_query"),
    ("sqlite", "ATTACH DATABASE '/tmp/x.db' AS x", "not_a_query"),
    ("sqlite", "DETACH DATABASE x", "not_a_query"),
    ("sqlite", "SELECT load_extension('/tmp/evil.so')", "denied_function"),
    ("sqlite", "SELECT randomblob(1000000000)", "denied_function"),
    ("sqlite", "SELECT zeroblob(1000000000)", "denied_function"),
    ("sqlite", "SELECT sqlite_version()", "denied_function"),
    ("sqlite", "REPLACE INTO departments VALUES (1, 'x', 1)", "unsupported"),
    ("sqlite", "SELECT * FROM main.departments", "unknown_table"),
    ("sqlite", 'SELECT name FROM employees WHERE "salary" > 10', "denied_column"),
    ("sqlite", "SELECT title FROM departments WHERE dept_id = @x", "placeholder"),
    ("sqlite", "SELECT title FROM departments WHERE dept_id = $x", "unknown_column"),  # sqlglot reads a name
]


@pytest.mark.parametrize("dialect,query,code", in_every_dialect(BAD_EVERYWHERE) + BAD_PER_DIALECT)
def test_refused(dialect: str, query: str, code: str) -> None:
    refused(query, dialect, code=code)


# ------------------------------------------------------------------------------------------
# Denied columns: in every clause
# ------------------------------------------------------------------------------------------

DENIED_COLUMN = [
    "SELECT salary FROM employees",
    "SELECT e.salary FROM employees e",
    "SELECT name FROM employees WHERE salary > 10",
    "SELECT name FROM employees ORDER BY salary",
    "SELECT dept_id, COUNT(salary) FROM employees GROUP BY dept_id",
    "SELECT dept_id FROM employees GROUP BY dept_id HAVING MAX(salary) > 1",
    "SELECT name FROM employees e JOIN departments d ON d.budget = e.salary",
    "SELECT title FROM departments WHERE budget IN (SELECT salary FROM employees)",
    "SELECT title FROM departments d WHERE EXISTS (SELECT 1 FROM employees e WHERE e.salary > d.budget)",
    "WITH s AS (SELECT salary FROM employees) SELECT * FROM s",
    "SELECT name FROM employees UNION SELECT CAST(salary AS TEXT) FROM employees",
    "SELECT SUM(salary) OVER (PARTITION BY dept_id) FROM employees",
    "SELECT CASE WHEN salary > 1 THEN 'x' END FROM employees",
    "SELECT id_card FROM employee_performance",
    "SELECT name FROM employees JOIN employee_performance USING (id_card)",
    "SELECT name FROM employees WHERE SALARY > 10",
    "SELECT COUNT(DISTINCT salary) FROM employees",
]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("query", DENIED_COLUMN)
def test_denied_column_in_every_clause(dialect: str, query: str) -> None:
    error = refused(query, dialect, code="denied_column")
    assert "salary" in error.message or "id_card" in error.message
    assert "may not be read" in error.message


def test_star_expands_to_allowed_columns_only() -> None:
    result = check("SELECT * FROM employees e JOIN departments d ON d.dept_id = e.dept_id")
    assert "salary" not in result.text
    assert "employees.salary" not in result.columns
    assert "employees.name" in result.columns and "departments.budget" in result.columns
    assert "salary" not in check("SELECT e.* FROM employees e").text
    assert "id_card" not in check("SELECT * FROM employee_performance").text


# ------------------------------------------------------------------------------------------
# Unknown names, did-you-mean
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_unknown_table_suggests_closest(dialect: str) -> None:
    error = refused("SELECT * FROM employee", dialect, code="unknown_table")
    assert "'employee'" in error.message
    assert "did you mean 'employees'" in error.hint
    assert "departments" in error.hint


@pytest.mark.parametrize("dialect", DIALECTS)
def test_unknown_column_suggests_closest(dialect: str) -> None:
    error = refused("SELECT titel FROM departments", dialect, code="unknown_column")
    assert "'titel'" in error.message
    assert "did you mean departments.title" in error.hint
    error = refused("SELECT d.budgett FROM departments d", dialect, code="unknown_column")
    assert "budget" in error.hint


def test_ambiguous_column() -> None:
    refused("SELECT dept_id FROM employees, departments", code="ambiguous_column")


# ------------------------------------------------------------------------------------------
# Functions
# ------------------------------------------------------------------------------------------

GOOD_FUNCTIONS = {
    "sqlite": "SELECT strftime('%Y', hired_at), julianday(hired_at), date(hired_at), IIF(dept_id > 1, 1, 0), "
    "COALESCE(name, ''), NULLIF(dept_id, 0), LOWER(name), SUBSTR(name, 1, 2), ROUND(dept_id / 2.0, 1), "
    "ROW_NUMBER() OVER (ORDER BY name) FROM employees",
    "postgres": "SELECT date_trunc('month', hired_at), EXTRACT(YEAR FROM hired_at), to_char(hired_at, 'YYYY'), "
    "age(hired_at), now(), current_date, COALESCE(name, ''), STRING_AGG(name, ',') OVER (), "
    "RANK() OVER (ORDER BY dept_id), CAST(dept_id AS TEXT) FROM employees",
    "mysql": "SELECT DATE_FORMAT(hired_at, '%Y'), DATEDIFF(hired_at, NOW()), TIMESTAMPDIFF(DAY, hired_at, NOW()), "
    "YEAR(hired_at), QUARTER(hired_at), IF(dept_id > 1, 1, 0), IFNULL(name, ''), CONCAT(name, 'x') FROM employees",
}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_analyst_functions_allowed(dialect: str) -> None:
    assert check(GOOD_FUNCTIONS[dialect], dialect).text


def test_denied_function_message_and_hint() -> None:
    error = refused("SELECT pg_sleep(10)", "postgres", code="denied_function")
    assert "pg_sleep()" in error.message
    assert "date_trunc" in error.hint and "COUNT" in error.hint


def test_manifest_functions_extend_the_allowlist() -> None:
    base = manifest("sqlite")
    extended = base.model_copy(update={"functions": ["my_udf"]})
    assert check_sql("SELECT my_udf(title) FROM departments", extended).text
    support.refused(check_sql, "SELECT my_udf(title) FROM departments", base, code="denied_function")


def test_allowlist_names_resolve() -> None:
    assert UNRESOLVED == []


# ------------------------------------------------------------------------------------------
# Enum literals
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(
    "where",
    [
        "performance_grade = '优秀'",
        "p.performance_grade <> '优秀'",
        "'优秀' = performance_grade",
        "performance_grade IN ('A', '优秀')",
        "performance_grade NOT IN ('优秀')",
    ],
)
def test_hallucinated_enum_value(dialect: str, where: str) -> None:
    error = refused(f"SELECT employee_id FROM employee_performance p WHERE {where}", dialect, code="enum_value")
    assert "'优秀'" in error.message and "performance_grade" in error.message
    assert "'A' (优秀)" in error.hint and "'D' (待改进)" in error.hint


def test_legal_enum_values_pass() -> None:
    assert check("SELECT employee_id FROM employee_performance WHERE performance_grade IN ('A', 'B')").text
    # LIKE is a pattern, not a value
    assert check("SELECT employee_id FROM employee_performance WHERE performance_grade LIKE 'A%'").text


# ------------------------------------------------------------------------------------------
# Accepted shapes
# ------------------------------------------------------------------------------------------

GOOD = [
    "SELECT title FROM departments",
    "SELECT d.title, COUNT(*) AS n FROM departments d JOIN employees e ON e.dept_id = d.dept_id GROUP BY d.title",
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5) SELECT i FROM n",
    "WITH big AS (SELECT dept_id FROM departments WHERE budget > 10) SELECT name FROM employees WHERE dept_id IN (SELECT dept_id FROM big)",
    "SELECT title FROM departments UNION SELECT name FROM employees",
    "SELECT title FROM departments INTERSECT SELECT title FROM departments",
    "SELECT title FROM departments EXCEPT SELECT name FROM employees",
    "SELECT (SELECT MAX(budget) FROM departments) AS top",
    "SELECT title FROM departments ORDER BY budget DESC LIMIT 3 OFFSET 1",
    "SELECT title FROM departments /* a comment; DROP TABLE x */ WHERE budget > 0",
    "SELECT 1",
]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("query", GOOD)
def test_accepted(dialect: str, query: str) -> None:
    result = check(query, dialect)
    assert result.text and "/*" not in result.text
    assert result.limit == 101 and result.max_rows == 100
    # the output is a single statement that the sandbox accepts again
    assert len(sqlglot.parse(result.text.replace("\\:", ":"), read=dialect)) == 1


def test_output_is_regenerated_not_echoed() -> None:
    result = check("select   title from departments -- trailing")
    assert result.text == "SELECT departments.title AS title FROM (SELECT dept_id, title, budget FROM departments) AS departments LIMIT 101"
    assert result.tables == ("departments",) and result.columns == ("departments.title",)


# ------------------------------------------------------------------------------------------
# Limits
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query,expected",
    [
        ("SELECT title FROM departments", "LIMIT 101"),
        ("SELECT title FROM departments LIMIT 5000", "LIMIT 101"),
        ("SELECT title FROM departments LIMIT 3", "LIMIT 3"),
        ("SELECT title FROM departments LIMIT 500 OFFSET 10", "LIMIT 101 OFFSET 10"),
        ("SELECT title FROM departments LIMIT (SELECT 1000)", ") AS q LIMIT 101"),
        ("SELECT title FROM departments LIMIT 10 + 990", ") AS q LIMIT 101"),
    ],
)
def test_limit(query: str, expected: str) -> None:
    assert check(query).text.endswith(expected)


def test_limit_max_rows_argument() -> None:
    result = check("SELECT title FROM departments", max_rows=100_000)
    assert result.limit == 100_001 and result.text.endswith("LIMIT 100001")


# ------------------------------------------------------------------------------------------
# Row filters
# ------------------------------------------------------------------------------------------


def test_missing_row_filter_variable() -> None:
    error = refused("SELECT name FROM employees", vars={}, code="missing_variable")
    assert "tenant_id" in error.message and "tenant_id" in error.hint
    # not reading the filtered table needs no variable
    assert check("SELECT title FROM departments", vars={}).text


@pytest.mark.parametrize("dialect", DIALECTS)
def test_row_filter_binds_variable(dialect: str) -> None:
    result = check("SELECT name FROM employees", dialect)
    assert "WHERE tenant_id = :var_tenant_id" in result.text
    assert result.params == {"var_tenant_id": 7}


# ------------------------------------------------------------------------------------------
# References
# ------------------------------------------------------------------------------------------

LIST_FORMS = {
    "postgres": "employee_performance.employee_id = ANY(:ref_members)",
    "sqlite": "employee_performance.employee_id IN (SELECT CAST(value AS TEXT) FROM JSON_EACH(:ref_members))",
    "mysql": "employee_performance.employee_id IN :ref_members",
}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_list_reference(dialect: str) -> None:
    result = check("SELECT employee_id FROM employee_performance WHERE employee_id IN (<members>)", dialect,
                   params={"members": ["E1", "E2"]})
    assert LIST_FORMS[dialect] in result.text
    expected = json.dumps(["E1", "E2"]) if dialect == "sqlite" else ["E1", "E2"]
    assert result.params == {"ref_members": expected}
    assert result.expanding == (frozenset({"ref_members"}) if dialect == "mysql" else frozenset())


def test_a_long_postgres_list_gets_a_switch_bound_false() -> None:
    """From ``PG_SWITCHED_LIST`` values on, PostgreSQL's list is written with a switch that
    picks the hashed branch or the plain one (``references._switch``); both are the plain
    comparison, so the sandbox binds False and the executor may choose."""
    from structq.safety.sql.rules.references import PG_SWITCHED_LIST

    query = "SELECT employee_id FROM employee_performance WHERE employee_id IN (<members>)"
    short = check(query, "postgres", params={"members": [f"E{i}" for i in range(PG_SWITCHED_LIST - 1)]})
    assert LIST_FORMS["postgres"] in short.text and "CASE" not in short.text and short.switches == {}
    members = [f"E{i}" for i in range(PG_SWITCHED_LIST)]
    result = check(query, "postgres", params={"members": members})
    test = "employee_performance.employee_id = ANY(:ref_members)"
    assert (f"CASE WHEN :ref_members_hashed THEN CASE ({test}) WHEN TRUE THEN TRUE WHEN FALSE THEN FALSE END "
            f"ELSE {test} END") in result.text
    assert result.params == {"ref_members": members, "ref_members_hashed": False}
    assert result.switches == {"ref_members_hashed": "ref_members"}
    negated = check(query.replace(" IN ", " NOT IN "), "postgres", params={"members": members})
    assert "NOT CASE WHEN :ref_members_hashed THEN" in negated.text


def test_each_long_postgres_list_gets_its_own_switch() -> None:
    """The same reference twice, and a reference whose name would collide with a switch."""
    from structq.safety.sql.rules.references import PG_SWITCHED_LIST

    many = [f"E{i}" for i in range(PG_SWITCHED_LIST)]
    result = check("SELECT employee_id FROM employee_performance WHERE employee_id IN (<members>) "
                   "OR employee_id IN (<members>) OR employee_id IN (<members_hashed>)", "postgres",
                   params={"members": many, "members_hashed": many})
    assert set(result.switches.values()) == {"ref_members", "ref_members_2", "ref_members_hashed"}
    assert len(set(result.switches)) == 3 and not set(result.switches) & set(result.switches.values())
    for switch, name in result.switches.items():
        assert result.params[switch] is False and result.params[name] == many
        assert f"CASE WHEN :{switch} THEN CASE (employee_performance.employee_id = ANY(:{name}))" in result.text


def test_a_switched_list_keeps_the_compared_expression_s_own_parameters() -> None:
    """The compared expression is written twice; a row-filter variable or reference in it is
    bound once, under its one name."""
    from structq.safety.sql.rules.references import PG_SWITCHED_LIST

    many = list(range(PG_SWITCHED_LIST))
    result = check("SELECT name FROM employees WHERE employee_id + <top.n> IN (<ids>)", "postgres",
                   params={"ids": many, "top.n": [3]})
    assert result.text.count(":ref_top__n") == 2 and result.text.count(":ref_ids)") == 2
    assert result.params == {"var_tenant_id": 7, "ref_top__n": 3, "ref_ids": many, "ref_ids_hashed": False}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_scalar_reference(dialect: str) -> None:
    result = check("SELECT title FROM departments WHERE dept_id = <top.dept_id>", dialect, params={"top.dept_id": [2]})
    assert "departments.dept_id = :ref_top__dept_id" in result.text
    assert result.params == {"ref_top__dept_id": 2}


def test_scalar_reference_needs_one_row() -> None:
    with pytest.raises(PlanError, match=r"scalar reference <top> needs exactly one row, got 3"):
        check("SELECT title FROM departments WHERE dept_id = <top.dept_id>", params={"top.dept_id": [1, 2, 3]})
    with pytest.raises(PlanError, match="got 0"):
        check("SELECT title FROM departments WHERE dept_id > <top>", params={"top": []})


def test_missing_reference() -> None:
    with pytest.raises(PlanError, match=r"<members>"):
        check("SELECT title FROM departments WHERE title IN (<members>)", params={})


def test_reference_text_inside_a_string_is_not_a_reference() -> None:
    result = check("SELECT title FROM departments WHERE title = '<members>'")
    assert "'<members>'" in result.text and result.params == {}


def test_placeholder_named_like_ours_is_still_refused() -> None:
    refused("SELECT title FROM departments WHERE title = :ref_members", code="placeholder")


# ------------------------------------------------------------------------------------------
# Every code's message and hint
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query,dialect,code,in_message,in_hint",
    [
        ("SELECT 1 FROM", "sqlite", "parse_error", "line 1", "SELECT"),
        ("SELECT 1; SELECT 2", "sqlite", "multiple_statements", "found 2", "single SELECT"),
        ("REPLACE INTO departments VALUES (1)", "mysql", "unsupported", "REPLACE", "read-only"),
        ("PRAGMA x", "sqlite", "not_a_query", "PRAGMA", "read-only"),
        ("DELETE FROM departments", "sqlite", "write", "DELETE", "read-only"),
        ("SELECT 1 FROM departments FOR UPDATE", "postgres", "locking", "FOR UPDATE", "read-only"),
        ("SELECT ?", "sqlite", "placeholder", "?", "<step>"),
        ("SELECT * FROM nope", "sqlite", "unknown_table", "'nope'", "declared tables"),
        ("SELECT nope FROM departments", "sqlite", "unknown_column", "'nope'", "departments: dept_id, title, budget"),
        ("SELECT salary FROM employees", "sqlite", "denied_column", "'salary'", "readable columns of employees"),
        ("SELECT sleep(1)", "mysql", "denied_function", "sleep()", "aggregate"),
        ("SELECT 1 FROM employee_performance WHERE performance_grade = 'Z'", "sqlite", "enum_value", "'Z'", "'A' (优秀)"),
    ],
)
def test_messages_and_hints(query: str, dialect: str, code: str, in_message: str, in_hint: str) -> None:
    error = refused(query, dialect, code=code)
    assert in_message in error.message
    assert in_hint in error.hint
    assert error.source == "hr"


# ------------------------------------------------------------------------------------------
# Accepted rewrites executed on a real SQLite database through sqlalchemy.text()
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine():
    engine = database_engine()
    yield engine
    engine.dispose()


def run(engine, result: SafeQuery) -> list[tuple]:
    statement = text(result.text)
    if result.expanding:
        statement = statement.bindparams(*(bindparam(n, expanding=True) for n in result.expanding))
    with engine.connect() as connection:
        return [tuple(r) for r in connection.execute(statement, result.params)]


def test_run_row_filter_and_star(engine) -> None:
    rows = run(engine, check("SELECT * FROM employees ORDER BY employee_id"))
    assert [r[0] for r in rows] == ["E1", "E2", "E3"]  # tenant 7 only
    assert all(len(r) == 5 for r in rows)  # salary dropped


def test_run_left_join_keeps_outer_semantics(engine) -> None:
    rows = run(engine, check("SELECT d.title, COUNT(e.employee_id) FROM departments d "
                             "LEFT JOIN employees e ON e.dept_id = d.dept_id GROUP BY d.title ORDER BY d.title"))
    assert rows == [("Empty", 0), ("Ops", 0), ("R&D", 2), ("Sales", 1)]


def test_run_colon_literals_round_trip(engine) -> None:
    for value in ["10:30", "a::b", ":x"]:
        result = check(f"SELECT employee_id, note FROM project_members WHERE note = '{value}'")
        assert run(engine, result) == [next(r for r in [("E1", "10:30"), ("E2", "a::b"), ("E3", ":x")] if r[1] == value)]
    assert run(engine, check("SELECT '10:30' AS t")) == [("10:30",)]
    # A colon after a word character is written unmarked; any other colon is marked.
    assert run(engine, check("SELECT '1:54%' AS a, 'é:x' AS b, 'a\\:b' AS c, 'q'':x' AS d")) == [
        ("1:54%", "é:x", "a\\:b", "q':x")]


def test_run_list_reference_of_40000_values(engine) -> None:
    members = [f"X{i}" for i in range(40_000)] + ["E1", "E3"]
    result = check("SELECT employee_id FROM employee_performance WHERE employee_id IN (<members>) ORDER BY 1",
                   params={"members": members})
    assert run(engine, result) == [("E1",), ("E3",)]
    result = check("SELECT COUNT(*) FROM employee_performance WHERE employee_id NOT IN (<members>)",
                   params={"members": members})
    assert run(engine, result) == [(3,)]


def test_run_empty_list_reference(engine) -> None:
    q_in = "SELECT COUNT(*) FROM employee_performance WHERE employee_id IN (<members>)"
    q_not = "SELECT COUNT(*) FROM employee_performance WHERE employee_id NOT IN (<members>)"
    assert run(engine, check(q_in, params={"members": []})) == [(0,)]
    assert run(engine, check(q_not, params={"members": []})) == [(5,)]


def test_run_scalar_reference_and_hostile_value(engine) -> None:
    result = check("SELECT employee_id FROM project_members WHERE project_name = <p>",
                   params={"p": ["星火'; DROP TABLE employees; --"]})
    assert run(engine, result) == []
    assert run(engine, check("SELECT COUNT(*) FROM departments")) == [(4,)]


def test_run_truncation_row(engine) -> None:
    result = check("SELECT title FROM departments", max_rows=2)
    assert len(run(engine, result)) == 3  # max_rows + 1 tells the executor it truncated


# ------------------------------------------------------------------------------------------
# Statement boundaries, hints, double-quoted strings, name spelling, scopes
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("tail", [";", "; -- done", "; /* done */", ";;", ";\n-- a\n/* b */"])
def test_empty_trailing_statements_are_not_extra_statements(dialect: str, tail: str) -> None:
    assert check("SELECT title FROM departments" + tail, dialect).text.endswith("LIMIT 101")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_statement_after_a_trailing_comment_still_counts(dialect: str) -> None:
    refused("SELECT title FROM departments; -- x\nDROP TABLE departments", dialect, code="multiple_statements")


@pytest.mark.parametrize("hint", ["MAX_EXECUTION_TIME(100000)", "SET_VAR(sql_mode = '')"])
def test_mysql_optimizer_hints_are_refused(hint: str) -> None:
    error = refused(f"SELECT /*+ {hint} */ title FROM departments", "mysql", code="unsupported")
    assert "optimizer hint" in error.message


def test_sqlite_double_quoted_string_is_a_string() -> None:
    result = check('SELECT title FROM departments WHERE title = "R&D"')
    assert "departments.title = 'R&D'" in result.text
    # a name that can be a column or an alias stays one
    assert 'ORDER BY "t"' in check('SELECT title AS "t" FROM departments ORDER BY "t"').text
    refused('SELECT title FROM departments WHERE "salary" = 1', code="unknown_column")


def test_double_quoted_string_elsewhere_says_use_single_quotes() -> None:
    error = refused('SELECT title FROM departments WHERE title = "R&D"', "postgres", code="unknown_column")
    assert "single quotes" in error.hint


@pytest.mark.parametrize("dialect", DIALECTS)
def test_table_names_match_without_case_and_keep_manifest_spelling(dialect: str) -> None:
    result = check("SELECT D.title FROM DEPARTMENTS D", dialect)
    assert f"FROM {QUALIFIER[dialect]}departments) AS d" in result.text
    result = check("SELECT Departments.title FROM Departments", dialect)
    assert f"FROM {QUALIFIER[dialect]}departments) AS departments" in result.text and result.tables == ("departments",)


def test_mixed_case_manifest_names_are_quoted_on_postgres() -> None:
    base = manifest("postgres", filters=False)
    tables = [t.model_copy(update={"name": "Departments"}) if t.name == "departments" else t for t in base.tables]
    mixed = base.model_copy(update={"tables": tables})
    result = check_sql("SELECT * FROM departments", mixed)
    assert 'FROM hr."Departments") AS departments' in result.text


def test_reused_alias_is_resolved_per_scope() -> None:
    # "p" is project_members outside and employee_performance inside: the enum check applies
    # to the inner comparison only, and the read columns name the right tables.
    query = ("SELECT p.employee_id FROM project_members p WHERE p.project_name = '星火' AND p.employee_id IN "
             "(SELECT p.employee_id FROM employee_performance p WHERE p.performance_grade = 'A')")
    result = check(query)
    assert "project_members.project_name" in result.columns
    assert "employee_performance.performance_grade" in result.columns
    assert "employee_performance.project_name" not in result.columns
    bad = query.replace("= 'A'", "= '优秀'")
    refused(bad, code="enum_value")
    swapped = ("SELECT p.employee_id FROM employee_performance p WHERE p.performance_grade = 'A' AND EXISTS "
               "(SELECT 1 FROM project_members p WHERE p.project_name = 'X')")
    assert check(swapped).text


# ------------------------------------------------------------------------------------------
# Schema-qualified table names (the manifest's ``schema: hr``)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_schema_qualified_tables_are_read_through_the_row_filter(dialect: str) -> None:
    result = check("SELECT e.name FROM HR.Employees e WHERE e.dept_id IN (SELECT dept_id FROM hr.departments)", dialect)
    assert "FROM hr.employees WHERE tenant_id = :var_tenant_id) AS e" in result.text
    assert "FROM hr.departments" in result.text
    assert result.tables == ("departments", "employees") and result.params == {"var_tenant_id": 7}
    assert "hr.employees.name" not in check("SELECT hr.employees.name FROM hr.employees", dialect).text


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(
    "query,code",
    [
        ("SELECT * FROM other.departments", "unknown_table"),
        ("SELECT * FROM db.hr.departments", "unknown_table"),
        ("SELECT * FROM public.departments", "unknown_table"),
        ("SELECT * FROM information_schema.tables", "unknown_table"),
        ("SELECT other.departments.title FROM hr.departments", "unknown_column"),
    ],
)
def test_other_qualifiers_are_refused(dialect: str, query: str, code: str) -> None:
    refused(query, dialect, code=code)


def test_qualifier_hint_names_the_schema() -> None:
    assert "schema (hr.departments)" in refused("SELECT * FROM other.departments", code="unknown_table").hint
    bare = manifest("sqlite").model_copy(update={"schema_": None})
    with pytest.raises(SandboxViolation) as info:
        check_sql("SELECT title FROM hr.departments", bare)
    assert "declares no schema" in info.value.hint


def test_system_schema_is_refused_even_when_declared() -> None:
    system = manifest("postgres").model_copy(update={"schema_": "pg_catalog"})
    with pytest.raises(SandboxViolation) as info:
        check_sql("SELECT title FROM pg_catalog.departments", system)
    assert info.value.code == "unknown_table" and "system schema" in info.value.hint


def test_mysql_dual_keyword_is_written_back_unquoted() -> None:
    # sqlglot would regenerate DUAL as the quoted `dual`, which names a table, not the keyword
    assert check("SELECT 1 AS one FROM DUAL WHERE 1 = 1", "mysql").text == "SELECT 1 AS one FROM DUAL WHERE 1 = 1 LIMIT 101"
    for query in ("SELECT 1 FROM `dual`", "SELECT 1 FROM hr.dual", "SELECT 1 FROM dual AS d"):
        refused(query, "mysql", code="unknown_table")


def test_unaliased_derived_table_is_resolved() -> None:
    result = check("SELECT title FROM (SELECT title FROM departments) ORDER BY title")
    assert "AS _d1" in result.text and result.columns == ("departments.title",)


# ------------------------------------------------------------------------------------------
# Table functions, casts, string sizes, partly denied tables
# ------------------------------------------------------------------------------------------


def test_postgres_generate_series_in_from_is_accepted() -> None:
    # sqlglot parses it as ExplodingGenerateSeries: the table-function list must still match.
    result = check("SELECT g.n FROM generate_series(1, 3) AS g(n)", "postgres")
    assert "GENERATE_SERIES(1, 3) AS g(n)" in result.text


def test_sqlite_json_each_in_from_is_accepted_and_runs(engine) -> None:
    result = check("SELECT j.value FROM json_each('[1, 2, 3]') AS j ORDER BY j.value")
    assert run(engine, result) == [(1,), (2,), (3,)]


def test_sqlite_json_each_over_an_allowed_column_runs(engine) -> None:
    result = check("SELECT e.employee_id, j.value FROM employees AS e, json_each('[1]') AS j ORDER BY e.employee_id")
    assert [r[0] for r in run(engine, result)] == ["E1", "E2", "E3"]


def test_table_function_called_as_a_scalar_is_still_refused() -> None:
    refused("SELECT json_each('[1]') AS x", code="denied_function")


def test_star_over_a_table_function_expands_to_its_known_columns() -> None:
    # The function's columns are known (functions.TABLE_FUNCTION_COLUMNS); the table's denied
    # column stays out of the expansion.
    result = check("SELECT * FROM employee_performance AS p, jsonb_array_elements('[1]') AS j", "postgres")
    assert result.text.startswith("SELECT p.employee_id AS employee_id, p.performance_grade AS performance_grade, "
                                  "p.assessment_month AS assessment_month, j.value AS value FROM")
    assert "id_card" not in result.text


@pytest.mark.parametrize("query", [
    "SELECT CAST(d.budget AS NUMERIC(10, 2)) AS b FROM departments AS d",
    "SELECT CAST(d.title AS VARCHAR(5)) AS t FROM departments AS d",
    "SELECT CAST('2024-01-01' AS DATE) AS d",
    "SELECT CAST(d.budget AS TEXT) AS t FROM departments AS d",
])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_casts_to_value_types_are_accepted(dialect: str, query: str) -> None:
    check(query, dialect)


@pytest.mark.parametrize("query", ["SELECT CAST(1 AS xid) AS x", "SELECT CAST('x' AS regtype) AS x",
                                   "SELECT CAST('+' AS regoper) AS x", "SELECT CAST('x' AS public.mytype) AS x",
                                   "SELECT CAST(1 AS oid) AS x"])
def test_postgres_casts_to_catalog_types_are_refused(query: str) -> None:
    assert "is not allowed" in refused(query, "postgres", code="unsupported").message


@pytest.mark.parametrize("dialect, query", [
    ("sqlite", "SELECT printf('%5.2f', d.budget) AS x FROM departments AS d"),
    ("postgres", "SELECT lpad(d.title, 10, '.') AS x FROM departments AS d"),
    ("postgres", "SELECT repeat(d.title, 3) AS x FROM departments AS d"),
    ("mysql", "SELECT RPAD(d.title, 1000, ' ') AS x FROM departments AS d"),
])
def test_small_or_data_sized_strings_are_accepted(dialect: str, query: str) -> None:
    check(query, dialect)


@pytest.mark.parametrize("dialect, query", [
    ("sqlite", "SELECT printf('%1001d', 1) AS x"),
    ("sqlite", "SELECT printf('%.*c', 5, 'x') AS x"),
    ("sqlite", "SELECT printf(d.title, 1) AS x FROM departments AS d"),
    ("postgres", "SELECT format('%*s', 5, 'x') AS x"),
    ("postgres", "SELECT repeat('x', 100000000) AS x"),
    ("postgres", "SELECT lpad('x', 1001, 'y') AS x"),
    ("postgres", "SELECT repeat('x', 1000 * 1000) AS x"),
    ("postgres", "SELECT repeat('*', d.budget) AS x FROM departments AS d"),  # the data picks the size
    ("mysql", "SELECT SPACE(100000000) AS x"),
])
def test_constant_huge_strings_are_refused(dialect: str, query: str) -> None:
    refused(query, dialect, code="string_size")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_partly_denied_table_is_read_through_its_allowed_columns(dialect: str) -> None:
    result = check("SELECT p.employee_id FROM employee_performance AS p", dialect)
    assert ("(SELECT employee_id, performance_grade, assessment_month FROM "
            f"{QUALIFIER[dialect]}employee_performance) AS p") in result.text
    assert "id_card" not in result.text


def test_natural_join_over_allowed_columns_becomes_an_explicit_join(engine) -> None:
    result = check("SELECT COUNT(*) AS n FROM employees NATURAL JOIN departments")
    assert "NATURAL" not in result.text and "ON employees.dept_id = departments.dept_id" in result.text
    assert run(engine, result) == [(3,)]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_natural_join_without_known_common_columns_is_refused(dialect: str) -> None:
    refused("SELECT COUNT(*) AS n FROM departments NATURAL JOIN (SELECT 1 AS z) AS s", dialect, code="unsupported")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_what_qualify_columns_cannot_handle_is_refused(dialect: str) -> None:
    """A star over a derived table with two columns of one name, then a position: sqlglot's
    ``qualify_columns`` fails an assertion there; the sandbox refuses instead of crashing."""
    refused("SELECT * FROM (SELECT e.name, e.name FROM employees e) AS s ORDER BY 1", dialect, code="unsupported")


# ------------------------------------------------------------------------------------------
# An output alias named like a column resolves as the database resolves it (``database_names.py``)
# ------------------------------------------------------------------------------------------

#: (dialect, query, code): a name the database would look up among the table's columns first,
#: which no source declares, where the database has no fallback to the alias.
ALIAS_REFUSED = [
    ("postgres", "SELECT budget AS total FROM departments ORDER BY total / 2", "unknown_column"),
    ("postgres", "SELECT dept_id, 'k' AS secret FROM departments GROUP BY dept_id, secret || ''", "unknown_column"),
    ("postgres", "SELECT title, COUNT(*) AS n FROM departments GROUP BY title HAVING n > 1", "unknown_column"),
    ("postgres", "SELECT budget AS total FROM departments WHERE total > 1", "unknown_column"),
    ("mysql", "SELECT budget AS total FROM departments WHERE total > 1", "unknown_column"),
    ("sqlite", "SELECT budget AS total, total + 1 AS more FROM departments", "unknown_column"),
    # MariaDB reads the alias in a window and in HAVING: a name that is also a column is ambiguous.
    ("mysql", "SELECT title, budget AS dept_id, ROW_NUMBER() OVER (ORDER BY dept_id) AS r FROM departments", "ambiguous_column"),
    ("mysql", "SELECT title AS budget, MAX(dept_id) AS m FROM departments GROUP BY title HAVING budget > 1", "ambiguous_column"),
]


@pytest.mark.parametrize(("dialect", "query", "code"), ALIAS_REFUSED)
def test_alias_names_the_database_would_read_as_columns_are_refused(dialect: str, query: str, code: str) -> None:
    error = refused(query, dialect, code=code)
    assert "alias" in error.hint


#: (dialect, query, text the checked query contains): where the database reads the column, the
#: name is qualified with it; where it falls back to the alias, the alias's expression is written.
ALIAS_RESOLVED = [
    ("sqlite", "SELECT budget * 2 AS budget FROM departments ORDER BY budget + 0", "ORDER BY departments.budget + 0"),
    ("postgres", "SELECT budget * 2 AS budget FROM departments ORDER BY budget + 0", "ORDER BY departments.budget + 0"),
    ("sqlite", "SELECT budget + 1 AS total FROM departments ORDER BY total / 2", "ORDER BY (departments.budget + 1) / 2"),
    ("mysql", "SELECT budget + 1 AS total FROM departments ORDER BY total / 2", "ORDER BY (departments.budget + 1) / 2"),
    ("sqlite", "SELECT dept_id, 'k' AS secret FROM departments GROUP BY dept_id, secret || ''", "GROUP BY departments.dept_id, 'k' || ''"),
    ("sqlite", "SELECT title, COUNT(*) AS n FROM departments GROUP BY title HAVING n > 1", "HAVING COUNT(*) > 1"),
    ("sqlite", "SELECT UPPER(title) AS t FROM departments GROUP BY t", "GROUP BY UPPER(departments.title)"),
    ("postgres", "SELECT UPPER(title) AS t FROM departments GROUP BY t", "GROUP BY UPPER(departments.title)"),
    ("sqlite", "SELECT budget AS total FROM departments ORDER BY total", "ORDER BY total"),
]


@pytest.mark.parametrize(("dialect", "query", "expected"), ALIAS_RESOLVED)
def test_alias_names_are_written_as_the_database_reads_them(dialect: str, query: str, expected: str) -> None:
    assert expected in check(query, dialect).text
