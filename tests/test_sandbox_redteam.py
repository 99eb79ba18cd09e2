"""Red team: attacks on the SQL sandbox (``check_sql``) and the executor behind it.

A language model that writes SQL may be prompt-injected through the data it reads, so every
query here is written as an attacker would write it. Grouped by the invariant of DESIGN.md §5
that the attack goes after:

- **blocked** attacks are ordinary tests: the sandbox refuses them, or what it accepts is
  harmless (checked by running the rewrite on a real database);
- **former holes** are attacks that once got through (whole-row reads, NATURAL joins on a
  denied column, unexpanded correlated stars, catalog casts, ``OPERATOR()``, allocation
  bombs); each asserts the safe behaviour, so a regression fails the run.

Real databases: SQLite always (an in-memory copy of ``sandbox_support.database()``, and a file
for the executor); PostgreSQL and MariaDB through the session servers, read through a
SELECT-only account, with the admin URL used only to set up data. Hole tests that run on an
database are written so that a fix of either kind passes them: the sandbox refusing the query,
or the query no longer revealing the protected data.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sandbox_support as support
import sqlglot
from sandbox_support import DIALECTS, FIXTURES, database_engine, database_file, in_every_dialect, manifest
from sqlalchemy import bindparam, create_engine, text
from sqlalchemy.engine import Engine
from sqlglot import exp

from structq.capabilities import Manifest, load_manifest_text
from structq.errors import ExecutionError, PlanError, SandboxViolation
from structq.executors.sql import SqlExecutor
from structq.safety import SafeQuery, check_sql

VARS = {"tenant_id": 7}
#: Rows of tenant 8: any of these in a result means the row filter was escaped.
OTHER_TENANT = {"E4", "E5", "Ann", "Bob"}
#: Values of denied columns in the test data (employee_performance.id_card, employees.salary).
ID_CARDS = {"x1", "x2", "x3", "x4", "x5"}


# ============================================================================================
# Helpers
# ============================================================================================


def check(query: str, dialect: str = "sqlite", *, filters: bool = True, **kw: Any) -> SafeQuery:
    kw.setdefault("vars", VARS)
    return check_sql(query, manifest(dialect, filters=filters), **kw)


def refused(query: str, dialect: str = "sqlite", *, code: str, **kw: Any) -> SandboxViolation:
    """``query`` is refused by the rule ``code`` names (see ``sandbox_support.refused``)."""
    return support.refused(check, query, dialect, code=code, **kw)


def accepted_or_none(query: str, dialect: str, **kw: Any) -> SafeQuery | None:
    """The rewrite, or None when the sandbox refuses (a refusal is always safe)."""
    try:
        return check(query, dialect, **kw)
    except (SandboxViolation, PlanError):
        return None


def bound(result: SafeQuery):
    statement = text(result.text or "")
    if result.expanding:
        statement = statement.bindparams(*(bindparam(n, expanding=True) for n in result.expanding))
    return statement


def run(engine: Engine, result: SafeQuery) -> list[tuple]:
    """Run the rewrite as it is, without the executor's own row cap."""
    with engine.connect() as connection:
        rows = [tuple(r) for r in connection.execute(bound(result), result.params)]
        connection.rollback()
    return rows


def flat(rows: list[tuple]) -> str:
    return repr(rows)


def manifest_for(dialect: str, url: str, **limits: Any) -> Manifest:
    """The shared test manifest pointed at a real database (for the executor)."""
    body = (FIXTURES / "manifest.yaml").read_text(encoding="utf-8")
    body = body.replace("url: sqlite:///hr.db", f"url: {url}\ndialect: {dialect}")
    if limits:
        settings = ", ".join(f"{k}: {v}" for k, v in {"max_rows": 100, **limits}.items())
        body = body.replace("limits: {max_rows: 100}", "limits: {" + settings + "}")
    return load_manifest_text(body)[0]


# ============================================================================================
# Databases: SQLite in memory (always), PostgreSQL / MariaDB read-only (session servers)
# ============================================================================================

@pytest.fixture(scope="module")
def sqlite_engine() -> Iterator[Engine]:
    engine = database_engine()
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return database_file(tmp_path_factory.mktemp("redteam") / "hr.db")


@pytest.fixture(scope="module")
def pg(pg_hr: tuple[str, str]) -> Iterator[dict[str, Any]]:
    admin, reader = pg_hr
    engines = {"admin": create_engine(admin), "reader": create_engine(reader), "url": reader}
    yield engines
    engines["admin"].dispose()
    engines["reader"].dispose()


@pytest.fixture(scope="module")
def mariadb(mariadb_hr: tuple[str, str]) -> Iterator[dict[str, Any]]:
    admin, reader = mariadb_hr
    engines = {"admin": create_engine(admin), "reader": create_engine(reader), "url": reader}
    yield engines
    engines["admin"].dispose()
    engines["reader"].dispose()


# ============================================================================================
# Invariants 1-2: one read-only query; nothing that writes or changes state
# ============================================================================================

WRITES_EVERYWHERE = [
    ("INSERT INTO departments SELECT * FROM departments", "write"),
    ("WITH x AS (SELECT 1) INSERT INTO departments VALUES (1, 'x', 1)", "write"),
    ("WITH x AS (SELECT 1) DELETE FROM departments", "write"),
    ("UPDATE departments SET budget = budget + 1 WHERE dept_id IN (SELECT dept_id FROM departments)", "write"),
    ("SELECT * INTO newtab FROM departments", "write"),
    ("CREATE VIEW v AS SELECT title FROM departments", "write"),
    ("CREATE TEMP TABLE t AS SELECT 1", "write"),
    ("DROP VIEW IF EXISTS v", "write"),
    ("SELECT 1; SELECT 2", "multiple_statements"),
    ("SELECT 1;\n;\nDELETE FROM departments", "multiple_statements"),
    ("SELECT 1 -- ;\n; UPDATE departments SET budget = 0", "multiple_statements"),
    ("SELECT 1 /* ; */ ; DELETE FROM departments", "multiple_statements"),
    ("SELECT title FROM departments; /* trailing */ DROP TABLE departments", "multiple_statements"),
    ("SAVEPOINT a", "not_a_query"),
    ("ROLLBACK", "not_a_query"),
    ("START TRANSACTION", "not_a_query"),
    ("SELECT title FROM departments FOR UPDATE", "locking"),
]

WRITES_PER_DIALECT = [
    ("sqlite", "EXPLAIN SELECT 1", "unsupported"),
    ("postgres", "EXPLAIN SELECT 1", "unsupported"),
    ("mysql", "EXPLAIN SELECT 1", "write"),
    ("postgres", "EXPLAIN ANALYZE SELECT 1", "unsupported"),
    ("postgres", "CALL p()", "unsupported"),
    ("postgres", "DO $$ BEGIN DELETE FROM departments; END $$", "unsupported"),
    ("postgres", "LISTEN x", "not_a_query"),
    ("postgres", "NOTIFY x", "not_a_query"),
    ("postgres", "VACUUM", "unsupported"),
    ("postgres", "REFRESH MATERIALIZED VIEW v", "unsupported"),
    ("postgres", "SHOW ALL", "unsupported"),
    ("postgres", "PREPARE p AS SELECT 1", "unsupported"),
    ("postgres", "EXECUTE p", "unsupported"),
    ("postgres", "DEALLOCATE p", "not_a_query"),
    ("postgres", "DECLARE c CURSOR FOR SELECT 1", "unsupported"),
    ("postgres", "FETCH c", "unsupported"),
    ("postgres", "LOCK TABLE departments", "unsupported"),
    ("postgres", "CHECKPOINT", "not_a_query"),
    ("postgres", "DISCARD ALL", "not_a_query"),
    ("postgres", "RESET ALL", "unsupported"),
    ("postgres", "SET ROLE postgres", "unsupported"),
    ("postgres", "SET SESSION AUTHORIZATION postgres", "unsupported"),
    ("postgres", "SELECT * INTO TEMP x FROM departments", "write"),
    ("postgres", "SELECT * INTO UNLOGGED x FROM departments", "write"),
    ("postgres", "SELECT title FROM departments FOR NO KEY UPDATE", "locking"),
    ("postgres", "SELECT title FROM departments FOR KEY SHARE", "locking"),
    ("postgres", "SELECT title FROM departments FOR UPDATE SKIP LOCKED", "locking"),
    ("postgres", "SELECT title FROM departments d FOR UPDATE OF d NOWAIT", "locking"),
    ("postgres", "WITH x AS (SELECT 1) SELECT * FROM x FOR UPDATE", "locking"),
    ("postgres", "WITH d AS (UPDATE departments SET budget = 0 RETURNING *) SELECT COUNT(*) FROM d", "write"),
    ("postgres", "WITH d AS (INSERT INTO departments VALUES (9, 'x', 1) RETURNING 1) SELECT 1", "write"),
    ("postgres", "WITH d AS (MERGE INTO departments t USING departments s ON t.dept_id = s.dept_id WHEN MATCHED THEN DELETE) SELECT 1", "write"),
    ("postgres", "COPY (SELECT title FROM departments) TO '/tmp/x'", "write"),
    ("postgres", "COPY departments FROM PROGRAM 'id'", "write"),
    ("mysql", "SELECT title INTO @x FROM departments", "write"),
    ("mysql", "FLUSH TABLES", "not_a_query"),
    ("mysql", "KILL 1", "write"),
    ("mysql", "SHUTDOWN", "not_a_query"),
    ("mysql", "SELECT title FROM departments FOR SHARE", "locking"),
    ("mysql", "SELECT title FROM departments FOR UPDATE NOWAIT", "locking"),
    ("mysql", "SELECT /*+ SET_VAR(sql_mode='') */ title FROM departments", "unsupported"),
    ("mysql", "SELECT /*+ MAX_EXECUTION_TIME(99999999) */ title FROM departments", "unsupported"),
    ("mysql", "INSERT IGNORE INTO departments VALUES (1, 'x', 1)", "write"),
    ("mysql", "CREATE TABLE x SELECT * FROM departments", "write"),
    ("sqlite", "VACUUM INTO '/tmp/x.db'", "unsupported"),
    ("sqlite", "VACUUM", "unsupported"),
    ("sqlite", "REINDEX", "not_a_query"),
    ("sqlite", "ANALYZE", "write"),
    ("sqlite", "RELEASE a", "not_a_query"),
    ("sqlite", "PRAGMA query_only = 0", "not_a_query"),
    ("sqlite", "PRAGMA main.journal_mode = DELETE", "not_a_query"),
    ("sqlite", "ATTACH 'file:/tmp/x.db?mode=rwc' AS x", "not_a_query"),
    ("sqlite", "INSERT OR REPLACE INTO departments VALUES (1, 'x', 1)", "write"),
    ("sqlite", "CREATE TRIGGER t AFTER INSERT ON departments BEGIN SELECT 1; END", "multiple_statements"),
    ("sqlite", "SELECT title FROM departments; PRAGMA writable_schema = 1", "multiple_statements"),
]

SIDE_EFFECT_FUNCTIONS = [
    ("postgres", "SELECT pg_notify('a', 'b')"),
    ("postgres", "SELECT txid_current()"),
    ("postgres", "SELECT pg_current_xact_id()"),
    ("postgres", "SELECT pg_terminate_backend(1)"),
    ("postgres", "SELECT pg_cancel_backend(1)"),
    ("postgres", "SELECT pg_reload_conf()"),
    ("postgres", "SELECT pg_rotate_logfile()"),
    ("postgres", "SELECT pg_switch_wal()"),
    ("postgres", "SELECT lo_create(0)"),
    ("postgres", "SELECT lo_unlink(1)"),
    ("postgres", "SELECT pg_advisory_xact_lock(1)"),
    ("postgres", "SELECT pg_try_advisory_lock(1)"),
    ("postgres", "SELECT currval('s')"),
    ("postgres", "SELECT lastval()"),
    ("postgres", "SELECT set_config('default_transaction_read_only', 'off', false)"),
    ("postgres", "SELECT current_setting('is_superuser')"),
    ("postgres", "SELECT query_to_xml('select * from secrets', true, true, '')"),
    ("postgres", "SELECT pg_read_binary_file('/etc/passwd')"),
    ("postgres", "SELECT to_regclass('secrets')"),
    ("postgres", "SELECT has_table_privilege('secrets', 'select')"),
    ("postgres", "SELECT inet_server_addr()"),
    ("postgres", "SELECT title FROM departments WHERE dept_id = pg_sleep(1)::text::int"),
    ("postgres", "SELECT 1 FROM departments, pg_sleep(5)"),
    ("postgres", "SELECT pg_catalog.set_config('a', 'b', true)"),
    ("postgres", "SELECT public.lower(title) FROM departments"),
    ("postgres", "SELECT xpath('/a', '<a/>')"),
    ("postgres", "SELECT dblink_connect('host=127.0.0.1')"),
    ("mysql", "SELECT NAME_CONST('a', 1)"),
    ("mysql", "SELECT sys_exec('id')"),
    ("mysql", "SELECT sys_eval('id')"),
    ("mysql", "SELECT MASTER_POS_WAIT('a', 1)"),
    ("mysql", "SELECT IS_FREE_LOCK('a')"),
    ("mysql", "SELECT IS_USED_LOCK('a')"),
    ("mysql", "SELECT RELEASE_ALL_LOCKS()"),
    ("mysql", "SELECT LAST_INSERT_ID(1)"),
    ("mysql", "SELECT FOUND_ROWS()"),
    ("mysql", "SELECT ROW_COUNT()"),
    ("mysql", "SELECT CONNECTION_ID()"),
    ("mysql", "SELECT UUID()"),
    ("mysql", "SELECT VERSION()"),
    ("mysql", "SELECT SCHEMA()"),
    ("mysql", "SELECT CURRENT_ROLE()"),
    ("mysql", "SELECT SYSTEM_USER()"),
    ("mysql", "SELECT SESSION_USER()"),
    ("mysql", "SELECT EXTRACTVALUE('<a>1</a>', '/a')"),
    ("mysql", "SELECT UPDATEXML('<a/>', '/a', '<b/>')"),
    ("mysql", "SELECT RANDOM_BYTES(1024)"),
    ("mysql", "SELECT BENCHMARK(100000000, SHA1('a'))"),
    ("mysql", "SELECT title FROM departments WHERE SLEEP(1) = 0"),
    ("mysql", "SELECT GET_LOCK('x', 10)"),
    ("mysql", "SELECT title FROM departments ORDER BY (SELECT SLEEP(1))"),
    ("sqlite", "SELECT fts3_tokenizer('simple')"),
    ("sqlite", "SELECT readfile('/etc/passwd')"),
    ("sqlite", "SELECT writefile('/tmp/x', 'a')"),
    ("sqlite", "SELECT edit('a')"),
    ("sqlite", "SELECT sqlite_source_id()"),
    ("sqlite", "SELECT sqlite_compileoption_used('x')"),
    ("sqlite", "SELECT changes()"),
    ("sqlite", "SELECT last_insert_rowid()"),
    ("sqlite", "SELECT total_changes()"),
    ("sqlite", "SELECT sqlite_offset(title) FROM departments"),
    ("sqlite", "SELECT hex(zeroblob(10))"),
    ("sqlite", "SELECT length(randomblob(1000000000))"),
    ("sqlite", "SELECT load_extension('/tmp/x.so', 'init')"),
    ("sqlite", "SELECT * FROM generate_series(1, 10)"),
    ("sqlite", "SELECT * FROM carray(1, 2)"),
    ("sqlite", "SELECT main.lower(title) FROM departments"),
]


@pytest.mark.parametrize("dialect,query,code", in_every_dialect(WRITES_EVERYWHERE) + WRITES_PER_DIALECT)
def test_writes_extra_statements_and_commands_are_refused(dialect: str, query: str, code: str) -> None:
    refused(query, dialect, code=code)


@pytest.mark.parametrize("dialect,query", SIDE_EFFECT_FUNCTIONS)
def test_side_effect_and_system_functions_are_refused(dialect: str, query: str) -> None:
    refused(query, dialect, code="denied_function")


# ============================================================================================
# Invariant 3: undeclared tables and catalogs are never read
# ============================================================================================

UNDECLARED_EVERYWHERE = [
    "SELECT * FROM secrets",
    "SELECT title FROM departments WHERE EXISTS (SELECT 1 FROM secrets)",
    "SELECT title FROM departments UNION ALL SELECT v FROM secrets",
    "SELECT (SELECT MAX(v) FROM secrets) AS x",
    "SELECT title FROM departments d JOIN secrets s ON s.k = d.title",
    "WITH s AS (SELECT * FROM secrets) SELECT * FROM s",
    "WITH secrets AS (SELECT * FROM secrets) SELECT * FROM secrets",
    "WITH a AS (WITH secrets AS (SELECT 1 AS v) SELECT v FROM secrets) SELECT v FROM secrets",
    "SELECT * FROM (WITH secrets AS (SELECT 1 AS v) SELECT v FROM secrets) x, secrets",
    "SELECT v FROM secrets UNION ALL (SELECT 1)",
    "SELECT title FROM departments AS secrets UNION SELECT v FROM secrets",
    "SELECT * FROM hr.secrets",
    "SELECT * FROM other.departments",
    "SELECT * FROM db.hr.departments",
    'SELECT * FROM "hr.departments"',
    'SELECT * FROM "departments "',
    "SELECT * FROM information_schema.tables",
    "SELECT * FROM INFORMATION_SCHEMA.COLUMNS",
    "SELECT * FROM pg_catalog.pg_shadow",
    "SELECT * FROM pg_shadow",
    "SELECT * FROM pg_stat_activity",
    "SELECT * FROM pg_settings",
    "SELECT * FROM mysql.user",
    "SELECT * FROM performance_schema.threads",
    "SELECT * FROM sys.processlist",
    "SELECT * FROM sqlite_master",
    "SELECT * FROM sqlite_schema",
    "SELECT * FROM sqlite_temp_master",
    "SELECT * FROM temp.sqlite_master",
    "SELECT * FROM main.sqlite_master",
    "SELECT * FROM sqlite_sequence",
    "SELECT * FROM sqlite_stat1",
    "SELECT * FROM dbstat",
    "SELECT * FROM sqlite_dbpage",
    "SELECT title FROM departments WHERE title = (SELECT sql FROM sqlite_master)",
    "SELECT * FROM pragma_database_list",
    "SELECT name FROM pragma_function_list",
    "SELECT * FROM secrets\xa0",
    "SELECT * FROM sеcrets",
    "SELECT * FROM ｓｅｃｒｅｔｓ",
]

UNDECLARED_PER_DIALECT = [
    ("postgres", "TABLE secrets"),
    ("postgres", "TABLE pg_shadow"),
    ("postgres", "SELECT * FROM (TABLE secrets) x"),
    ("postgres", "SELECT title FROM departments WHERE title IN (TABLE secrets)"),
    ("postgres", "SELECT title FROM departments UNION TABLE secrets"),
    ("postgres", "SELECT * FROM departments, LATERAL (TABLE secrets) x"),
    ("postgres", "SELECT title FROM departments WHERE EXISTS (TABLE secrets)"),
    ("postgres", "SELECT title FROM departments d WHERE d.title = ANY(SELECT v FROM secrets)"),
    ("postgres", "SELECT * FROM unnest(ARRAY(SELECT v FROM secrets))"),
    ("postgres", "SELECT * FROM ONLY secrets"),
    ("postgres", "SELECT * FROM secrets*"),
    ("postgres", 'SELECT * FROM "public".secrets'),
    ("postgres", "SELECT * FROM pg_temp.departments"),
    ("postgres", "SELECT * FROM pg_toast.pg_toast_1"),
    ("postgres", "SELECT * FROM jsonb_array_elements((SELECT to_jsonb(array_agg(s)) FROM secrets s))"),
    ("mysql", "SELECT * FROM `mysql`.`user`"),
    ("mysql", "SELECT * FROM `mysql.user`"),
    ("mysql", "SELECT * FROM sandbox_redteam.secrets"),
    ("mysql", "SELECT * FROM information_schema.processlist"),
    ("mysql", "SELECT title FROM departments UNION SELECT v FROM secrets"),
    ("mysql", "SELECT 1 FROM `dual`"),
    ("mysql", "SELECT * FROM secrets PARTITION (p0)"),
    ("sqlite", "SELECT title FROM temp.departments"),
    ("sqlite", 'SELECT title FROM "main".departments'),
    ("sqlite", "SELECT * FROM json_each((SELECT group_concat(sql) FROM sqlite_master))"),
    ("sqlite", 'SELECT "sql" FROM sqlite_master'),
    ("postgres", "WITH a AS (SELECT * FROM b), b AS (SELECT 1 AS x) SELECT * FROM a"),
    ("mysql", "WITH a AS (SELECT * FROM b), b AS (SELECT 1 AS x) SELECT * FROM a"),
]


@pytest.mark.parametrize("dialect,query", in_every_dialect(UNDECLARED_EVERYWHERE) + UNDECLARED_PER_DIALECT)
def test_undeclared_tables_and_catalogs_are_refused(dialect: str, query: str) -> None:
    refused(query, dialect, code="unknown_table")


def test_sqlite_later_cte_is_the_cte_as_on_the_database(sqlite_engine: Engine) -> None:
    # SQLite resolves a later CTE's name even without RECURSIVE: the sandbox reorders the CTEs,
    # so the query that runs reads no table, as the database would have.
    query = "WITH a AS (SELECT x FROM departments), departments AS (SELECT 'cte' AS x) SELECT x FROM a"
    result = check(query, "sqlite")
    assert result.tables == ()
    assert run(sqlite_engine, result) == [("cte",)]
    with sqlite_engine.connect() as connection:
        assert [tuple(r) for r in connection.exec_driver_sql(query)] == [("cte",)]


# ============================================================================================
# Invariant 4: denied columns appear nowhere
# ============================================================================================

DENIED_EVERYWHERE = [
    "SELECT id_card FROM employee_performance",
    "SELECT p.id_card FROM employee_performance p",
    "SELECT employee_performance.id_card FROM employee_performance",
    'SELECT p."Id_Card" FROM employee_performance p',
    "SELECT ID_CARD FROM employee_performance",
    "SELECT id_card AS x FROM employee_performance",
    "SELECT x FROM (SELECT id_card AS x FROM employee_performance) t",
    "SELECT x FROM (SELECT id_card x FROM employee_performance) t",
    "WITH c AS (SELECT id_card FROM employee_performance) SELECT COUNT(*) FROM c",
    "WITH c(a) AS (SELECT id_card FROM employee_performance) SELECT a FROM c",
    "SELECT employee_id FROM employee_performance WHERE id_card = 'x1'",
    "SELECT employee_id FROM employee_performance WHERE id_card LIKE 'x%'",
    "SELECT employee_id FROM employee_performance WHERE LENGTH(id_card) > 1",
    "SELECT employee_id FROM employee_performance ORDER BY id_card",
    "SELECT employee_id FROM employee_performance GROUP BY employee_id, id_card",
    "SELECT employee_id FROM employee_performance GROUP BY employee_id HAVING MAX(id_card) > 'x'",
    "SELECT MAX(id_card) FROM employee_performance",
    "SELECT COUNT(DISTINCT id_card) FROM employee_performance",
    "SELECT GROUP_CONCAT(id_card) FROM employee_performance",
    "SELECT employee_id, ROW_NUMBER() OVER (ORDER BY id_card) FROM employee_performance",
    "SELECT employee_id, LAG(id_card) OVER (ORDER BY employee_id) FROM employee_performance",
    "SELECT employee_id FROM employee_performance p WHERE EXISTS (SELECT 1 FROM departments d WHERE p.id_card = d.title)",
    "SELECT title FROM departments d WHERE EXISTS (SELECT 1 FROM employee_performance p WHERE p.id_card = d.title)",
    "SELECT title FROM departments WHERE title IN (SELECT id_card FROM employee_performance)",
    "SELECT (SELECT MAX(id_card) FROM employee_performance) AS x",
    "SELECT employee_id FROM employee_performance UNION SELECT id_card FROM employee_performance",
    "SELECT CASE WHEN id_card = 'x1' THEN 1 ELSE 0 END FROM employee_performance",
    "SELECT COALESCE(NULL, id_card) FROM employee_performance",
    "SELECT CAST(id_card AS TEXT) FROM employee_performance",
    "SELECT p.employee_id FROM employee_performance p JOIN employee_performance q USING (id_card)",
    "SELECT COUNT(*) FROM employee_performance p JOIN (SELECT 'x1' AS id_card) s USING (id_card)",
    "SELECT p.employee_id FROM employee_performance p JOIN employee_performance q ON p.id_card = q.id_card",
    "SELECT employee_id FROM employee_performance p WHERE p.id_card IS NOT NULL",
    "SELECT name FROM employees ORDER BY salary",
    "SELECT SUM(salary) FROM employees",
    "SELECT e.name FROM employees e WHERE e.salary > 100",
    "SELECT e.name FROM employees e JOIN employees f USING (salary)",
    "SELECT employee_id AS id_card FROM employee_performance ORDER BY id_card",
    "SELECT id_card FROM employee_performance, (SELECT 'x' AS id_card) s",
    "SELECT [id_card] FROM employee_performance",
]

DENIED_PER_DIALECT = [
    ("sqlite", "SELECT `id_card` FROM employee_performance"),
    ("mysql", "SELECT `id_card` FROM employee_performance"),
    ("postgres", "SELECT DISTINCT ON (id_card) employee_id FROM employee_performance"),
    ("postgres", "SELECT STRING_AGG(id_card, ',') FROM employee_performance"),
    ("postgres", "SELECT employee_id FROM employee_performance WHERE id_card ~ '^x'"),
    ("postgres", "SELECT ARRAY_AGG(p.id_card) FROM employee_performance p"),
    ("postgres", "SELECT ROW(p.id_card) FROM employee_performance p"),
    ("postgres", "SELECT x.id_card FROM employee_performance p, unnest(ARRAY[p]) AS x"),
    ("postgres", "SELECT employee_id FROM employee_performance p WINDOW w AS (ORDER BY p.id_card)"),
    ("mysql", "SELECT employee_id FROM employee_performance WHERE MATCH(id_card) AGAINST ('x')"),
    ("mysql", "SELECT employee_id FROM employee_performance WHERE id_card SOUNDS LIKE 'x1'"),
    ("mysql", "SELECT JSON_OBJECT('a', id_card) FROM employee_performance"),
    ("sqlite", "SELECT json_object('a', id_card) FROM employee_performance"),
    ("sqlite", "SELECT employee_id FROM employee_performance WHERE id_card GLOB 'x*'"),
    ("sqlite", 'SELECT employee_id FROM employee_performance WHERE "id_card" = \'x1\''),
]


@pytest.mark.parametrize("dialect,query", in_every_dialect(DENIED_EVERYWHERE) + DENIED_PER_DIALECT)
def test_denied_columns_are_refused(dialect: str, query: str) -> None:
    refused(query, dialect, code="denied_column")


#: Attacks from the tables above that an earlier or different rule refuses before the one the
#: table is named for: a zero-width character is a tokenizer error, ``ORDER BY 4`` past the
#: allowed columns is an unknown column, MySQL's ``INTO @x`` / ``PROCEDURE`` do not parse, ``@x``
#: and ``@@x`` are placeholders, a whole-row value (``ROW(p.*)``, ``row_to_json``) and a column
#: alias list are unsupported, table functions are denied functions. Each keeps the code it gets
#: today, so a change in which rule catches it is noticed. The last field names the table it
#: came from; the write probes below still run the "writes" and "side_effect" ones on the databases.
REFUSED_BY_ANOTHER_RULE = [
    ("postgres", "SELECT q.id_card FROM (SELECT * FROM unnest(ARRAY(SELECT p FROM employee_performance p))) AS q",
     "denied_column", "whole_row"),
    ("mysql", "DO SLEEP(1)", "parse_error", "writes"),
    ("mysql", "HANDLER departments OPEN", "parse_error", "writes"),
    ("mysql", "SELECT title FROM departments INTO @x", "parse_error", "writes"),
    ("mysql", "SELECT title FROM departments LIMIT 1 INTO @a", "parse_error", "writes"),
    ("mysql", "SELECT title FROM departments PROCEDURE ANALYSE()", "parse_error", "writes"),
    ("mysql", "XA START 'x'", "parse_error", "writes"),
    ("mysql", "SELECT title FROM departments INTO OUTFILE '/tmp/x' FIELDS TERMINATED BY ','", "parse_error", "writes"),
    ("mysql", "SELECT @x := 1", "placeholder", "writes"),
    ("mysql", "SELECT title FROM departments WHERE (@x := 1) = 1", "placeholder", "writes"),
    ("sqlite", "WITH x AS (SELECT 1) REPLACE INTO departments VALUES (1, 'x', 1)", "parse_error", "writes"),
    ("postgres", "SELECT row_to_json(d) FROM departments d", "unsupported", "side_effect"),
    ("postgres", "SELECT ROW(d.*) FROM departments d", "unsupported", "side_effect"),
    ("mysql", "SELECT title FROM departments WHERE title = @@version", "placeholder", "side_effect"),
    ("mysql", "SELECT title FROM departments WHERE title = @@global.secure_file_priv", "placeholder", "side_effect"),
    ("sqlite", "SELECT * FROM pragma_table_info('secrets')", "denied_function", "undeclared"),
    ("postgres", "SELECT * FROM pragma_table_info('secrets')", "denied_function", "undeclared"),
    ("mysql", "SELECT * FROM pragma_table_info('secrets')", "denied_function", "undeclared"),
    ("sqlite", "SELECT title FROM departments, pragma_table_info('secrets') p", "denied_function", "undeclared"),
    ("postgres", "SELECT title FROM departments, pragma_table_info('secrets') p", "denied_function", "undeclared"),
    ("mysql", "SELECT title FROM departments, pragma_table_info('secrets') p", "denied_function", "undeclared"),
    ("sqlite", "SELECT * FROM pg_ls_dir('.')", "denied_function", "undeclared"),
    ("postgres", "SELECT * FROM pg_ls_dir('.')", "denied_function", "undeclared"),
    ("mysql", "SELECT * FROM pg_ls_dir('.')", "denied_function", "undeclared"),
    ("sqlite", "SELECT * FROM dblink('host=127.0.0.1', 'select 1') AS t(a int)", "denied_function", "undeclared"),
    ("postgres", "SELECT * FROM dblink('host=127.0.0.1', 'select 1') AS t(a int)", "denied_function", "undeclared"),
    ("mysql", "SELECT * FROM dblink('host=127.0.0.1', 'select 1') AS t(a int)", "denied_function", "undeclared"),
    ("sqlite", "SELECT * FROM JSON_TABLE('[1]', '$[*]' COLUMNS (a INT PATH '$')) AS j", "denied_function", "undeclared"),
    ("postgres", "SELECT * FROM JSON_TABLE('[1]', '$[*]' COLUMNS (a INT PATH '$')) AS j", "denied_function", "undeclared"),
    ("mysql", "SELECT * FROM JSON_TABLE('[1]', '$[*]' COLUMNS (a INT PATH '$')) AS j", "denied_function", "undeclared"),
    ("sqlite", "SELECT * FROM secrets\u200b", "parse_error", "undeclared"),
    ("postgres", "SELECT * FROM secrets\u200b", "parse_error", "undeclared"),
    ("mysql", "SELECT * FROM secrets\u200b", "parse_error", "undeclared"),
    ("postgres", "SELECT * FROM ROWS FROM (generate_series(1, 2))", "unsupported", "undeclared"),
    ("sqlite", "SELECT employee_id FROM employee_performance AS p(a, b, c, d)", "unsupported", "denied"),
    ("postgres", "SELECT employee_id FROM employee_performance AS p(a, b, c, d)", "unsupported", "denied"),
    ("mysql", "SELECT employee_id FROM employee_performance AS p(a, b, c, d)", "unsupported", "denied"),
    ("sqlite", "SELECT d FROM employee_performance AS p(a, b, c, d)", "unsupported", "denied"),
    ("postgres", "SELECT d FROM employee_performance AS p(a, b, c, d)", "unsupported", "denied"),
    ("mysql", "SELECT d FROM employee_performance AS p(a, b, c, d)", "unsupported", "denied"),
    ("sqlite", "SELECT * FROM employee_performance ORDER BY 4", "unknown_column", "denied"),
    ("postgres", "SELECT * FROM employee_performance ORDER BY 4", "unknown_column", "denied"),
    ("mysql", "SELECT * FROM employee_performance ORDER BY 4", "unknown_column", "denied"),
    ("sqlite", "SELECT p.* FROM employee_performance p ORDER BY 4", "unknown_column", "denied"),
    ("postgres", "SELECT p.* FROM employee_performance p ORDER BY 4", "unknown_column", "denied"),
    ("mysql", "SELECT p.* FROM employee_performance p ORDER BY 4", "unknown_column", "denied"),
    ("sqlite", "SELECT * FROM employee_performance p GROUP BY 1, 2, 3, 4", "unknown_column", "denied"),
    ("postgres", "SELECT * FROM employee_performance p GROUP BY 1, 2, 3, 4", "unknown_column", "denied"),
    ("mysql", "SELECT * FROM employee_performance p GROUP BY 1, 2, 3, 4", "unknown_column", "denied"),
    ("sqlite", "SELECT id_card\u200b FROM employee_performance", "parse_error", "denied"),
    ("postgres", "SELECT id_card\u200b FROM employee_performance", "parse_error", "denied"),
    ("mysql", "SELECT id_card\u200b FROM employee_performance", "parse_error", "denied"),
    ("sqlite", "SELECT іd_card FROM employee_performance", "unknown_column", "denied"),
    ("postgres", "SELECT іd_card FROM employee_performance", "unknown_column", "denied"),
    ("mysql", "SELECT іd_card FROM employee_performance", "unknown_column", "denied"),
    ("postgres", "SELECT `id_card` FROM employee_performance", "parse_error", "denied"),
    ("postgres", "SELECT employee_id FROM employee_performance ORDER BY id_card USING <", "parse_error", "denied"),
    ("postgres", "SELECT row_to_json(p) FROM employee_performance p", "unsupported", "denied"),
    ("postgres", "SELECT ROW(p.*) FROM employee_performance p", "unsupported", "denied"),
    ("postgres", "SELECT id_card(p) FROM employee_performance p", "unsupported", "denied"),
    ("mysql", "SELECT DEFAULT(id_card) FROM employee_performance", "unknown_column", "denied"),
]


@pytest.mark.parametrize("dialect,query,code,table", REFUSED_BY_ANOTHER_RULE)
def test_attacks_refused_by_another_rule_keep_their_code(dialect: str, query: str, code: str, table: str) -> None:
    refused(query, dialect, code=code)


QUOTED_NAMES = [
    'SELECT "ID_CARD" FROM employee_performance',
    'SELECT "id_card\u00a0" FROM employee_performance',
    'SELECT "employee_performance.id_card" FROM employee_performance',
    'SELECT "p.id_card" FROM employee_performance p',
]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("query", QUOTED_NAMES)
def test_quoted_names_never_reach_a_denied_column(dialect: str, query: str, sqlite_engine: Engine) -> None:
    """Refused, or (MySQL, SQLite) read as the string literal the database would also see."""
    result = accepted_or_none(query, dialect)
    if result is None:
        return
    assert not any("id_card" in c for c in result.columns)
    tree = sqlglot.parse_one(result.text or "", read=dialect)
    assert not [c for c in tree.find_all(exp.Column) if "id_card" in c.name.lower()], result.text
    if dialect == "sqlite":
        assert not any(v in flat(run(sqlite_engine, result)) for v in ID_CARDS)


STARS = [
    "SELECT * FROM employee_performance",
    "SELECT p.* FROM employee_performance p",
    "SELECT * FROM (SELECT * FROM employee_performance) x",
    "WITH c AS (SELECT * FROM employee_performance) SELECT c.* FROM c",
    "SELECT * FROM employee_performance p JOIN employee_performance q USING (employee_id)",
    "SELECT * FROM employee_performance p NATURAL JOIN employee_performance q",
    "SELECT * FROM employee_performance NATURAL JOIN project_members",
    "SELECT title FROM departments WHERE EXISTS (SELECT * FROM employee_performance)",
    "SELECT * FROM employees",
    "SELECT e.* FROM employees e",
]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("query", STARS)
def test_stars_expand_to_allowed_columns_only(dialect: str, query: str) -> None:
    result = check(query, dialect)
    lowered = (result.text or "").lower()
    assert "id_card" not in lowered and "salary" not in lowered
    tree = sqlglot.parse_one((result.text or "").replace("\\:", ":"), read=dialect)
    stars = [s for s in tree.find_all(exp.Star) if not isinstance(s.parent, exp.Count)]
    # the only star left is the limit wrapper's, over a query whose columns are explicit
    assert all(s.parent is tree for s in stars), result.text


def test_stars_run_without_denied_values(sqlite_engine: Engine) -> None:
    for query in STARS:
        result = check(query, "sqlite")
        rows = flat(run(sqlite_engine, result))
        assert not any(value in rows for value in ID_CARDS), (query, rows)
        assert "100" not in rows and "500" not in rows, (query, rows)


# ============================================================================================
# Invariant 8: row filters hold on every path to the filtered table
# ============================================================================================

FILTER_PATHS = [
    "SELECT employee_id, name FROM employees",
    "SELECT employee_id FROM employees WHERE tenant_id = 8",
    "SELECT employee_id FROM employees e WHERE e.tenant_id = 8 OR 1 = 1",
    "SELECT employee_id FROM employees WHERE tenant_id = 8 OR tenant_id <> 8 OR tenant_id IS NULL",
    "SELECT e.employee_id FROM employees e, employees f",
    "SELECT f.employee_id FROM employees e JOIN employees f ON f.dept_id <> -1",
    "SELECT e.employee_id FROM departments d LEFT JOIN employees e ON 1 = 1",
    "SELECT e.employee_id FROM employees e RIGHT JOIN departments d ON 1 = 1",
    "SELECT e.employee_id FROM employees e CROSS JOIN departments",
    "SELECT (SELECT GROUP_CONCAT(employee_id) FROM employees) AS x",
    "SELECT title FROM departments d WHERE EXISTS (SELECT 1 FROM employees e WHERE e.tenant_id = 8)",
    "SELECT employee_id FROM employees WHERE employee_id IN (SELECT employee_id FROM employees WHERE tenant_id = 8)",
    "SELECT employee_id FROM employees UNION SELECT employee_id FROM employees",
    "SELECT employee_id FROM employees UNION ALL SELECT 'x' EXCEPT SELECT 'y'",
    "SELECT employee_id FROM (SELECT * FROM employees) x",
    "SELECT employee_id FROM (SELECT * FROM employees WHERE tenant_id = 8 OR 1 = 1) AS x",
    "WITH e AS (SELECT * FROM employees) SELECT employee_id FROM e",
    "WITH employees AS (SELECT * FROM employees) SELECT employee_id FROM employees",
    "WITH x AS (SELECT * FROM hr.employees) SELECT employee_id FROM x",
    "WITH a AS (WITH employees AS (SELECT 'fake' AS name) SELECT name FROM employees) SELECT name FROM employees",
    "WITH a AS (WITH employees AS (SELECT 'fake' AS employee_id) SELECT employee_id FROM employees), "
    "b AS (SELECT employee_id FROM employees) SELECT employee_id FROM b",
    "SELECT * FROM (WITH employees AS (SELECT 'fake' AS n) SELECT n FROM employees) a, employees",
    "SELECT employee_id FROM employees WHERE employee_id IN (WITH employees AS (SELECT 'x' AS employee_id) "
    "SELECT employee_id FROM employees) OR employee_id IN (SELECT employee_id FROM employees)",
    "WITH RECURSIVE r(employee_id, n) AS (SELECT 'x', 0 UNION ALL SELECT e.employee_id, r.n + 1 FROM r, employees e "
    "WHERE r.n < 1) SELECT employee_id FROM r",
    "WITH RECURSIVE a AS (SELECT employee_id FROM employees), employees AS (SELECT 'fake' AS employee_id) "
    "SELECT employee_id FROM a",
    "SELECT title AS employee_id FROM departments AS employees",
    "SELECT employees.employee_id FROM employees AS e, employees",
    "SELECT employee_id FROM Employees",
    'SELECT employee_id FROM "EMPLOYEES"',
    "SELECT employee_id FROM hr.employees",
    "SELECT employee_id FROM HR.EMPLOYEES AS x",
    "SELECT employee_id FROM employees NOT INDEXED",
    "SELECT employee_id FROM employees TABLESAMPLE SYSTEM (100)",
    "SELECT employee_id FROM employees FOR SYSTEM_TIME AS OF '2000-01-01'",
    "SELECT employee_id FROM employees WITH (NOLOCK)",
    "SELECT employee_id FROM (employees)",
    "SELECT e.employee_id FROM (employees e JOIN departments d ON e.dept_id = d.dept_id)",
    "SELECT employee_id FROM employees NATURAL JOIN (SELECT 8 AS tenant_id) t",
    "SELECT employee_id FROM employees e JOIN (SELECT 8 AS tenant_id) t USING (tenant_id)",
    "SELECT employee_id FROM employees ORDER BY tenant_id DESC LIMIT 1",
    "SELECT MAX(employee_id) OVER () FROM employees",
]

FILTER_PATHS_PER_DIALECT = [
    ("postgres", "SELECT employee_id FROM ONLY employees"),
    ("postgres", "SELECT employee_id FROM employees*"),
    ("postgres", "TABLE employees"),
    ("postgres", "SELECT * FROM (TABLE employees) x"),
    ("postgres", "SELECT x.employee_id FROM departments d, LATERAL (SELECT employee_id FROM employees e "
                 "WHERE e.dept_id = d.dept_id OR TRUE) x"),
    ("postgres", "SELECT ARRAY(SELECT employee_id FROM employees) AS x"),
    ("postgres", "(WITH employees AS (SELECT 'fake' AS employee_id) SELECT employee_id FROM employees) "
                 "UNION ALL (SELECT employee_id FROM employees)"),
    ("postgres", "SELECT employee_id FROM employees UNION ALL (WITH employees AS (SELECT 'fake' AS employee_id) "
                 "SELECT employee_id FROM employees)"),
    ("mysql", "TABLE employees"),
    ("mysql", "SELECT employee_id FROM employees USE INDEX ()"),
    ("mysql", "SELECT employee_id FROM employees PARTITION (p0)"),
    ("mysql", "WITH employees AS (SELECT 'fake' AS employee_id) (SELECT employee_id FROM employees) "
              "UNION ALL (SELECT employee_id FROM employees)"),
    ("sqlite", "SELECT employee_id FROM employees INDEXED BY i"),
]


def _filter_holds(rows: list[tuple]) -> None:
    text = flat(rows)
    assert not any(value in text for value in OTHER_TENANT), text


def _filter_cases(dialect: str) -> list[str]:
    return FILTER_PATHS + [q for d, q in FILTER_PATHS_PER_DIALECT if d == dialect]


def _assert_filter_on_engine(engine: Engine, dialect: str) -> int:
    ran = 0
    for query in _filter_cases(dialect):
        result = accepted_or_none(query, dialect)
        if result is None:
            continue
        assert result.params.get("var_tenant_id", 7) == 7
        try:
            rows = run(engine, result)
        except Exception:  # noqa: BLE001 - the database refusing is safe too
            continue
        _filter_holds(rows)
        ran += 1
    return ran


def test_row_filter_holds_on_every_path_sqlite(sqlite_engine: Engine) -> None:
    assert _assert_filter_on_engine(sqlite_engine, "sqlite") > 20


def test_row_filter_holds_on_every_path_postgres(pg: dict[str, Any]) -> None:
    assert _assert_filter_on_engine(pg["reader"], "postgres") > 20
    # the admin account too: the sandbox alone keeps the other tenant out
    assert _assert_filter_on_engine(pg["admin"], "postgres") > 20


def test_row_filter_holds_on_every_path_mariadb(mariadb: dict[str, Any]) -> None:
    assert _assert_filter_on_engine(mariadb["reader"], "mysql") > 20
    assert _assert_filter_on_engine(mariadb["admin"], "mysql") > 20


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("query", FILTER_PATHS)
def test_every_read_of_the_filtered_table_is_wrapped(dialect: str, query: str) -> None:
    result = accepted_or_none(query, dialect)
    if result is None:
        return
    tree = sqlglot.parse_one((result.text or "").replace("\\:", ":"), read=dialect)
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        if table.name.lower() != "employees":
            continue
        select = table.find_ancestor(exp.Select)
        where = select.args.get("where") if select else None
        wrapped = where is not None and "var_tenant_id" in where.sql()
        assert wrapped or table.name.lower() in ctes, result.text


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(
    "value",
    ["7 OR 1=1", "7) OR (1=1", "7; DROP TABLE employees", "' OR ''='", ":tenant_id", "%(var_tenant_id)s", "\\' OR 1=1 -- "],
)
def test_variables_are_bound_never_spliced(dialect: str, value: str) -> None:
    result = check("SELECT employee_id FROM employees", dialect, vars={"tenant_id": value})
    assert value not in (result.text or "")
    assert result.params == {"var_tenant_id": value}


def test_hostile_variable_values_stay_data(sqlite_engine: Engine) -> None:
    for value in ["7 OR 1=1", "' OR ''='", "7) OR (1=1", "7 --"]:
        result = check("SELECT employee_id FROM employees", "sqlite", vars={"tenant_id": value})
        rows = run(sqlite_engine, result)
        # a hostile string is one value compared with tenant_id, never SQL
        assert rows == [], (value, rows)


def test_or_filters_are_parenthesised() -> None:
    base = manifest("sqlite")
    body = (FIXTURES / "manifest.yaml").read_text(encoding="utf-8").replace(
        '    - {table: employees, where: "tenant_id = :tenant_id"}\n',
        '    - {table: employees, where: "tenant_id = :tenant_id OR dept_id = :dept"}\n'
        '    - {table: employees, where: "hired_at > \'2000-01-01\' OR dept_id IS NULL"}\n',
    )
    two = load_manifest_text(body)[0]
    assert two.source == base.source
    result = check_sql("SELECT employee_id FROM employees e WHERE e.dept_id = 9 OR TRUE", two,
                       vars={"tenant_id": 7, "dept": 1})
    assert "(tenant_id = :var_tenant_id OR dept_id = :var_dept) AND (hired_at > '2000-01-01' OR dept_id IS NULL)" in (
        result.text or "")


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("reference", [["x') OR ('1'='1"], ["'; DROP TABLE employees; --"], [":var_tenant_id"],
                                       ["%(var_tenant_id)s"], ["\\'"], [None]])
def test_reference_values_are_bound_never_spliced(dialect: str, reference: list) -> None:
    result = check("SELECT employee_id FROM employee_performance WHERE employee_id IN (<r>)", dialect,
                   params={"r": reference})
    for value in reference:
        if value:
            assert value not in (result.text or "")


def test_missing_variable_never_means_no_filter() -> None:
    for query in ["SELECT employee_id FROM employees", "WITH x AS (SELECT 1) SELECT employee_id FROM employees",
                  "SELECT title FROM departments WHERE EXISTS (SELECT 1 FROM employees)"]:
        refused(query, vars={}, code="missing_variable")
        refused(query, vars={"tenant": 7}, code="missing_variable")


# ============================================================================================
# Invariant 7: the outermost result is limited to max_rows + 1
# ============================================================================================

LIMITS = [
    "SELECT title FROM departments",
    "SELECT title FROM departments LIMIT 1000",
    "SELECT title FROM departments LIMIT ALL",
    "SELECT title FROM departments LIMIT -1",
    "SELECT title FROM departments LIMIT NULL",
    "SELECT title FROM departments LIMIT 1e9",
    "SELECT title FROM departments LIMIT '1000'",
    "SELECT title FROM departments LIMIT 0x100",
    "SELECT title FROM departments LIMIT 99999999999999999999999",
    "SELECT title FROM departments LIMIT 00000000000000000001000",
    "SELECT title FROM departments LIMIT (SELECT 1000)",
    "SELECT title FROM departments LIMIT 10 + 990",
    "SELECT title FROM departments LIMIT 2, 1000",
    "SELECT title FROM departments LIMIT 1000 OFFSET 0",
    "SELECT title FROM departments OFFSET 0",
    "SELECT title FROM departments LIMIT 1 OFFSET -5",
    "SELECT title FROM departments FETCH FIRST 1000 ROWS ONLY",
    "SELECT title FROM departments OFFSET 0 ROWS FETCH NEXT 1000 ROWS ONLY",
    "SELECT title FROM departments FETCH FIRST 100 PERCENT ROWS ONLY",
    "SELECT title FROM departments LIMIT 1 WITH TIES",
    "SELECT title FROM departments UNION ALL SELECT title FROM departments",
    "SELECT title FROM departments UNION ALL SELECT title FROM departments LIMIT 1000",
    "SELECT title FROM departments LIMIT 1 UNION ALL SELECT title FROM departments",
    "(SELECT title FROM departments LIMIT 1) UNION ALL (SELECT title FROM departments)",
    "SELECT title FROM (SELECT title FROM departments LIMIT 1000) x",
    "WITH x AS (SELECT title FROM departments LIMIT 1) SELECT title FROM departments",
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50) SELECT i FROM n",
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50) SELECT i FROM n LIMIT 1000",
    "SELECT a.title FROM departments a, departments b, departments c",
    "SELECT TOP 1000 title FROM departments",
]


def _outer_limit(text_: str, dialect: str) -> int | None:
    tree = sqlglot.parse_one(text_.replace("\\:", ":"), read=dialect)
    limit = tree.args.get("limit")
    if isinstance(limit, exp.Limit) and isinstance(limit.expression, exp.Literal) and limit.expression.is_int:
        return int(limit.expression.this)
    return None


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("query", LIMITS)
def test_outermost_limit_is_capped(dialect: str, query: str) -> None:
    result = accepted_or_none(query, dialect, max_rows=2)
    if result is None:
        return
    limit = _outer_limit(result.text or "", dialect)
    assert limit is not None and limit <= 3, result.text


def _limits_hold(engine: Engine, dialect: str) -> int:
    ran = 0
    for query in LIMITS:
        result = accepted_or_none(query, dialect, max_rows=2)
        if result is None:
            continue
        try:
            rows = run(engine, result)
        except Exception:  # noqa: BLE001
            continue
        assert len(rows) <= 3, (query, result.text, len(rows))
        ran += 1
    return ran


def test_limits_hold_on_sqlite(sqlite_engine: Engine) -> None:
    assert _limits_hold(sqlite_engine, "sqlite") > 15


def test_limits_hold_on_postgres(pg: dict[str, Any]) -> None:
    assert _limits_hold(pg["admin"], "postgres") > 15


def test_limits_hold_on_mariadb(mariadb: dict[str, Any]) -> None:
    assert _limits_hold(mariadb["admin"], "mysql") > 15


# ============================================================================================
# Invariant 9 / smuggling: what runs is regenerated; the database reads what was checked
# ============================================================================================

SMUGGLING = [
    # (dialect, query, rows of departments expected when it runs)
    ("mysql", "SELECT title FROM departments /*! WHERE 1=0 */", 4),
    ("mysql", "SELECT title FROM departments WHERE 1=1 /*!50000 AND 1=0 */", 4),
    ("mysql", "SELECT title FROM departments /*!99999 WHERE 1=0 */", 4),
    ("mysql", "SELECT title FROM departments # WHERE 1=0\n", 4),
    ("mysql", "SELECT title FROM departments WHERE title <> 'x\\' OR 1=0 -- '", 4),
    ("mysql", "SELECT title FROM departments WHERE title <> 'a\\\\' OR 1=0", 4),
    ("mysql", "SELECT title FROM departments WHERE title <> \"x\\\" OR 1=0 -- \"", 4),
    ("mysql", "SELECT title FROM departments WHERE title <> 'it''s' /* ' OR 1=0 -- */", 4),
    ("mysql", "SELECT title FROM departments WHERE title <> _utf8mb4'x' COLLATE utf8mb4_bin", 4),
    ("mysql", "SELECT title FROM departments WHERE title <> x'2720' -- 0x27 is a quote", 4),
    ("postgres", "SELECT title FROM departments /* /* */ WHERE 1=0 */", 4),
    ("postgres", "SELECT title FROM departments WHERE title <> 'a\\' OR 1=0 --'", 4),
    ("postgres", "SELECT title FROM departments WHERE title <> E'a\\' OR 1=0 --' ", 4),
    ("postgres", "SELECT title FROM departments WHERE title <> E'\\x27 OR 1=0 --'", 4),
    ("postgres", "SELECT title FROM departments WHERE title <> $$x' OR 1=0 --$$", 4),
    ("postgres", "SELECT title FROM departments WHERE title <> $q$x$$ OR 1=0 --$q$", 4),
    ("postgres", "SELECT title FROM departments WHERE title <> U&'\\0027 OR 1=0 --'", 4),
    ("postgres", "SELECT title AS \"a\"\" OR 1=0 --\" FROM departments", 4),
    ("sqlite", "SELECT title FROM departments WHERE title <> 'a\\' OR 1=0 --'", 4),
    ("sqlite", "SELECT title FROM departments -- WHERE 1=0", 4),
    ("sqlite", "SELECT title AS [x]] OR 1=0 --] FROM departments", 4),
    ("sqlite", "SELECT title AS `x`` OR 1=0` FROM departments", 4),
    ("sqlite", "SELECT title FROM departments WHERE title <> \"no such column\"", 4),
    # colons and percent signs must survive sqlalchemy.text() and the drivers' paramstyles
    ("sqlite", "SELECT title FROM departments WHERE title <> ':var_tenant_id'", 4),
    ("sqlite", "SELECT title AS \":x\" FROM departments", 4),
    ("postgres", "SELECT title FROM departments WHERE title <> '%(x)s' AND title <> '%s' AND title LIKE '%'", 4),
    ("postgres", "SELECT title FROM departments WHERE title <> $$:x$$", 4),
    ("postgres", "SELECT title AS \"a:b\" FROM departments", 4),
    ("mysql", "SELECT title FROM departments WHERE title <> '%(x)s' AND title <> '%s' AND title LIKE '%'", 4),
    ("mysql", "SELECT title AS `:x` FROM departments", 4),
    ("mysql", "SELECT title FROM departments WHERE title <> ':ref_x\\\\'", 4),
]

SMUGGLING_REFUSED = [
    ("postgres", "SELECT (ARRAY[1,2,3])[:2] AS x", "unsupported"),
    ("postgres", "SELECT 'a' || :'x' AS x", "parse_error"),
    ("mysql", "SELECT title FROM departments --x\n WHERE 1=0", "parse_error"),
    ("sqlite", "SELECT title FROM departments WHERE dept_id = ?1", "parse_error"),
    ("sqlite", "SELECT title FROM departments WHERE dept_id = :1", "parse_error"),
    ("sqlite", "SELECT title FROM departments WHERE dept_id = @x", "placeholder"),
    ("postgres", "SELECT title FROM departments WHERE dept_id = $1", "placeholder"),
    ("mysql", "SELECT title FROM departments WHERE dept_id = %s", "parse_error"),
    ("mysql", "SELECT title FROM departments WHERE dept_id = ?", "placeholder"),
    ("sqlite", "SELECT title FROM departments\x00; DELETE FROM departments", "multiple_statements"),
]


@pytest.mark.parametrize("dialect,query,code", SMUGGLING_REFUSED)
def test_smuggled_placeholders_and_unparsed_text_are_refused(dialect: str, query: str, code: str) -> None:
    refused(query, dialect, code=code)


@pytest.mark.parametrize("dialect,query,expected", SMUGGLING)
def test_regenerated_text_is_one_comment_free_statement(dialect: str, query: str, expected: int) -> None:
    result = accepted_or_none(query, dialect)
    if result is None:
        return
    statements = [s for s in sqlglot.parse((result.text or "").replace("\\:", ":"), read=dialect) if s]
    assert len(statements) == 1
    tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize((result.text or "").replace("\\:", ":"))
    assert not [t.comments for t in tokens if t.comments], result.text


def _smuggling_runs(engine: Engine, dialect: str) -> int:
    ran = 0
    for d, query, expected in SMUGGLING:
        if d != dialect:
            continue
        result = accepted_or_none(query, dialect)
        if result is None:
            continue
        rows = run(engine, result)
        assert len(rows) == expected, (query, result.text, rows)
        ran += 1
    return ran


def test_smuggling_runs_as_checked_on_sqlite(sqlite_engine: Engine) -> None:
    assert _smuggling_runs(sqlite_engine, "sqlite") >= 5


def test_smuggling_runs_as_checked_on_postgres(pg: dict[str, Any]) -> None:
    assert _smuggling_runs(pg["reader"], "postgres") >= 8


def test_smuggling_runs_as_checked_on_mariadb(mariadb: dict[str, Any]) -> None:
    assert _smuggling_runs(mariadb["reader"], "mysql") >= 8


def test_mariadb_no_backslash_escapes_keeps_strings_closed(mariadb: dict[str, Any]) -> None:
    """sqlglot writes quotes inside MySQL strings as '' (never \\'), so a server running with
    NO_BACKSLASH_ESCAPES still reads every literal where the sandbox ended it."""
    for query in ["SELECT title FROM departments WHERE title <> 'x\\' OR 1=0 -- '",
                  "SELECT title FROM departments WHERE title <> 'a\\\\' OR 1=0"]:
        result = check(query, "mysql")
        with mariadb["reader"].connect() as connection:
            connection.exec_driver_sql("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')")
            rows = connection.execute(bound(result), result.params).fetchall()
            connection.exec_driver_sql("SET SESSION sql_mode = REPLACE(@@sql_mode, 'NO_BACKSLASH_ESCAPES', '')")
        assert len(rows) == 4


# ============================================================================================
# Accepted hostile queries change nothing on real databases (read-only account AND admin)
# ============================================================================================


def _write_probe_queries(dialect: str) -> list[str]:
    return ([q for q, _ in WRITES_EVERYWHERE] + [q for d, q, _ in WRITES_PER_DIALECT if d == dialect]
            + [q for d, q in SIDE_EFFECT_FUNCTIONS if d == dialect]
            + [q for d, q, _, table in REFUSED_BY_ANOTHER_RULE
               if d == dialect and table in ("writes", "side_effect")])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_write_probe_gets_through(dialect: str) -> None:
    assert all(accepted_or_none(q, dialect) is None for q in _write_probe_queries(dialect))


# ============================================================================================
# FORMER HOLES — each asserts the safe behaviour; each once got through
# ============================================================================================

# --- H1 (critical, PostgreSQL): whole-row references read every column, denied ones included

WHOLE_ROW = [
    "SELECT p FROM employee_performance p",
    "SELECT employee_performance FROM employee_performance",
    "SELECT (p).id_card FROM employee_performance p",
    "SELECT (p.*).id_card FROM employee_performance p",
    "SELECT to_jsonb(p) FROM employee_performance p",
    "SELECT to_json(p) FROM employee_performance p",
    "SELECT jsonb_build_object('a', p) FROM employee_performance p",
    "SELECT CAST(p AS TEXT) FROM employee_performance p",
    "SELECT (p.*)::text FROM employee_performance p",
    "SELECT ARRAY[p.*] FROM employee_performance p",
    "SELECT array_to_string(ARRAY[p], ',') FROM employee_performance p",
    "SELECT unnest(ARRAY[p.*]) FROM employee_performance p",
    "SELECT array_agg(p) FROM employee_performance p",
    "SELECT MAX(CAST(p AS TEXT)) FROM employee_performance p",
    "SELECT employee_id FROM employee_performance p WHERE CAST(p AS TEXT) LIKE '%x1%'",
    "SELECT employee_id FROM employee_performance p ORDER BY p",
    "SELECT * FROM unnest(ARRAY(SELECT p FROM employee_performance p)) AS u",
]


@pytest.mark.parametrize("query", WHOLE_ROW)
def test_hole_whole_row_reference_is_refused(query: str) -> None:
    refused(query, "postgres", code="unsupported")


def test_hole_whole_row_reference_leaks_on_postgres(pg: dict[str, Any]) -> None:
    manifest_pg = manifest_for("postgres", pg["url"])
    executor = SqlExecutor(manifest_pg)
    try:
        for query in ["SELECT to_jsonb(p) FROM employee_performance p", "SELECT (p).id_card FROM employee_performance p"]:
            try:
                result = check_sql(query, manifest_pg, vars=VARS)
            except SandboxViolation:
                continue
            try:
                rows = executor.fetch(result).rows
            except ExecutionError:
                continue
            assert not any(value in flat(rows) for value in ID_CARDS), rows
    finally:
        executor.close()


# --- H2 (high, every dialect): NATURAL JOIN with a derived table joins on a denied column

NATURAL_ORACLE = "SELECT COUNT(*) FROM employee_performance NATURAL JOIN (SELECT '{value}' AS id_card) s"
NATURAL_EXTRACT = ("SELECT e.employee_id, g.salary FROM employees e NATURAL JOIN (SELECT 100 AS salary UNION "
                   "SELECT 200 UNION SELECT 300 UNION SELECT 400 UNION SELECT 500) g ORDER BY e.employee_id")


def _natural_join_oracle(engine: Engine, dialect: str) -> None:
    """The count must not depend on whether the guessed value is a real id_card."""
    outcomes = []
    for value in ["x1", "no-such-card"]:
        result = accepted_or_none(NATURAL_ORACLE.format(value=value), dialect)
        outcomes.append(None if result is None else run(engine, result))
    assert outcomes[0] == outcomes[1], outcomes


def _natural_join_extraction(engine: Engine, dialect: str) -> None:
    result = accepted_or_none(NATURAL_EXTRACT, dialect, filters=False)
    if result is None:
        return
    rows = run(engine, result)
    assert ("E1", 100) not in rows and ("E5", 500) not in rows, rows


@pytest.mark.parametrize("dialect", DIALECTS)
def test_hole_natural_join_on_denied_column_is_refused(dialect: str) -> None:
    refused(NATURAL_ORACLE.format(value="x1"), dialect, code="unsupported")


def test_hole_natural_join_oracle_sqlite(sqlite_engine: Engine) -> None:
    _natural_join_oracle(sqlite_engine, "sqlite")


def test_hole_natural_join_extraction_sqlite(sqlite_engine: Engine) -> None:
    _natural_join_extraction(sqlite_engine, "sqlite")


def test_hole_natural_join_postgres(pg: dict[str, Any]) -> None:
    _natural_join_oracle(pg["reader"], "postgres")
    _natural_join_extraction(pg["reader"], "postgres")


def test_hole_natural_join_mariadb(mariadb: dict[str, Any]) -> None:
    _natural_join_oracle(mariadb["reader"], "mysql")
    _natural_join_extraction(mariadb["reader"], "mysql")


# --- H3 (critical on PostgreSQL, sandbox-level everywhere): a correlated star in a derived
# table (SELECT p.*) is never expanded, so its columns are unknown and any name passes

CORRELATED_STAR = [
    "SELECT (SELECT z.id_card FROM (SELECT p.*) z) AS leak FROM employee_performance p",
    "SELECT (SELECT MAX(z.id_card) FROM (SELECT p.*) AS z) AS leak FROM employee_performance p",
    "SELECT p.employee_id, (SELECT y.id_card FROM (SELECT * FROM (SELECT p.*) x) y) AS leak FROM employee_performance p",
    "SELECT employee_id FROM employee_performance p WHERE EXISTS (SELECT 1 FROM (SELECT p.*) z WHERE z.id_card = 'x1')",
    "SELECT employee_id FROM employee_performance p WHERE 'x1' IN (SELECT z.id_card FROM (SELECT p.*) z)",
    "SELECT x.* FROM employee_performance p, LATERAL (SELECT * FROM (SELECT p.*) y) x",
]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("query", CORRELATED_STAR)
def test_hole_correlated_star_is_refused(dialect: str, query: str) -> None:
    refused(query, dialect, code="unsupported")


def test_hole_correlated_star_leaks_on_postgres(pg: dict[str, Any]) -> None:
    for query in CORRELATED_STAR:
        result = accepted_or_none(query, "postgres")
        if result is None:
            continue
        rows = run(pg["reader"], result)
        assert not any(value in flat(rows) for value in ID_CARDS) and rows != [("E1",)], (query, rows)


# --- H4 (medium, PostgreSQL): casts to reg* types read the system catalogs

CATALOG_CASTS = [
    "SELECT CAST('secrets' AS regclass) AS r",
    "SELECT CAST(CAST('secrets' AS regclass) AS oid) AS r",
    "SELECT 'pg_shadow'::regclass AS r",
    "SELECT CAST(CAST(10 AS oid) AS regrole) AS r",
    "SELECT CAST('pg_sleep' AS regproc) AS r",
    "SELECT CAST(CAST(2200 AS oid) AS regnamespace) AS r",
    "WITH RECURSIVE n(i) AS (SELECT 16380 UNION ALL SELECT i + 1 FROM n WHERE i < 16500) "
    "SELECT CAST(CAST(i AS oid) AS regclass) AS relation FROM n",
    "SELECT CAST(title AS regclass) FROM departments",
]


@pytest.mark.parametrize("query", CATALOG_CASTS)
def test_hole_catalog_casts_are_refused(query: str) -> None:
    refused(query, "postgres", code="unsupported")


def test_hole_catalog_casts_enumerate_tables_on_postgres(pg: dict[str, Any], pg_server) -> None:
    pg_server.execute([("CREATE TABLE IF NOT EXISTS payroll_secret (x int)", None)], database="sandbox_redteam")
    result = accepted_or_none("SELECT CAST('payroll_secret' AS regclass) AS r", "postgres")
    if result is None:
        return
    assert "payroll_secret" not in flat(run(pg["reader"], result))


# --- H5 (low, PostgreSQL): OPERATOR(schema.op) calls an operator the allowlist never saw


@pytest.mark.parametrize("query", ["SELECT 1 OPERATOR(public.+) 1", "SELECT 1 OPERATOR(pg_catalog.+) 1"])
def test_hole_qualified_operator_is_refused(query: str) -> None:
    refused(query, "postgres", code="denied_function")


# --- H6 (medium, SQLite): printf('%.*c', N, …) is the allocation bomb randomblob/zeroblob were
# refused for, and one function call is never interrupted by the statement timeout


def test_hole_sqlite_printf_allocation_bomb(sqlite_file: Path) -> None:
    query = "SELECT length(printf('%.*c', 200000000, 'x')) AS n"
    try:
        result = check(query, "sqlite")
    except SandboxViolation:
        return
    executor = SqlExecutor(manifest_for("sqlite", f"sqlite:///{sqlite_file}"))
    try:
        rows = executor.fetch(result).rows
    except ExecutionError:
        return
    finally:
        executor.close()
    assert rows[0][0] < 10_000_000, rows


def test_hole_sqlite_timeout_inside_one_function_call(sqlite_file: Path) -> None:
    inner = "printf('%.*c', 40000000, 'x')"
    for i in range(10):
        inner = f"replace({inner}, '{'xy'[i % 2]}', '{'yx'[i % 2]}')"
    try:
        result = check(f"SELECT length({inner}) AS n", "sqlite")
    except SandboxViolation:
        return
    executor = SqlExecutor(manifest_for("sqlite", f"sqlite:///{sqlite_file}", timeout_s=0.2))
    try:  # it ends: with rows, past the timeout, or too big — all bounded outcomes
        executor.fetch(result)
    except ExecutionError:
        pass
    finally:
        executor.close()


# --- Variants of the holes above, and the other findings of the same review

WHOLE_ROW_VARIANTS = [
    "SELECT (p).employee_id FROM employee_performance p",
    "SELECT (p.employee_id).x FROM employee_performance p",
    "SELECT jsonb_build_array(p.*) FROM employee_performance p",
    "SELECT COUNT(DISTINCT p) FROM employee_performance p",
    "SELECT e.name FROM employees e WHERE e IS NOT NULL",
    "SELECT x FROM (SELECT p FROM employee_performance p) AS x",
    "WITH c AS (SELECT p FROM employee_performance p) SELECT * FROM c",
    "SELECT p.employee_id AS p FROM employee_performance p ORDER BY p || 'x'",
    "SELECT p.employee_id AS p, ROW_NUMBER() OVER (ORDER BY p) AS r FROM employee_performance p",
]


@pytest.mark.parametrize("query", WHOLE_ROW_VARIANTS)
def test_whole_row_variants_are_refused(query: str) -> None:
    refused(query, "postgres", code="unsupported")


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("query", [
    "WITH s AS (SELECT 'x1' AS id_card) SELECT COUNT(*) FROM employee_performance NATURAL JOIN s",
    "SELECT COUNT(*) FROM (SELECT 'x1' AS id_card) s NATURAL JOIN employee_performance",
    "SELECT COUNT(*) FROM employee_performance NATURAL LEFT JOIN (SELECT 'x1' AS id_card) s",
    "SELECT COUNT(*) FROM employees NATURAL JOIN (SELECT 100 AS salary) s",
])
def test_natural_joins_on_denied_columns_are_refused(dialect: str, query: str) -> None:
    # NATURAL JOIN is refused as a whole (its join columns are implicit), before any column check
    refused(query, dialect, code="unsupported")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_using_join_on_a_denied_column_is_refused(dialect: str) -> None:
    query = "SELECT COUNT(*) FROM employee_performance p JOIN (SELECT 'x1' AS id_card) s USING (id_card)"
    refused(query, dialect, code="denied_column")


@pytest.mark.parametrize("query", [
    "SELECT * FROM employees FOR SYSTEM_TIME ALL",
    "SELECT * FROM departments FOR SYSTEM_TIME ALL",
    "SELECT title FROM departments FOR SYSTEM_TIME AS OF TIMESTAMP '2020-01-01 00:00:00'",
    "SELECT e.name FROM employees FOR SYSTEM_TIME BETWEEN '2020-01-01' AND '2030-01-01' AS e",
])
def test_mariadb_temporal_clauses_are_refused(query: str) -> None:
    # On a filtered table the derived table of the row filter would drop the clause silently.
    refused(query, "mysql", code="unsupported")


@pytest.mark.parametrize("dialect, query", [
    ("sqlite", "SELECT length(printf('%200000000c', 'x')) AS n"),
    ("sqlite", "SELECT length(printf('%.*c', 1000 * 1000, 'x')) AS n"),
    ("sqlite", "SELECT length(format('%!.*c', 200000000, 'x')) AS n"),
    ("postgres", "SELECT length(format('%1$*2$s', 'x', 200000000)) AS n"),
    ("postgres", "SELECT length(rpad('x', 200000000, 'y')) AS n"),
    ("mysql", "SELECT LENGTH(REPEAT('x', 200000000)) AS n"),
    ("mysql", "SELECT LENGTH(LPAD('x', 200000000, 'y')) AS n"),
])
def test_string_allocation_bombs_are_refused(dialect: str, query: str) -> None:
    refused(query, dialect, code="string_size")


@pytest.mark.parametrize("query,code", [
    ("SELECT 1 OPERATOR(+) 1", "denied_function"),
    ("SELECT d.title OPERATOR(pg_catalog.||) 'x' FROM departments d", "denied_function"),
    ("SELECT CAST(CAST(d.dept_id AS oid) AS regclass) FROM departments d", "unsupported"),
    ("SELECT d.title::regnamespace FROM departments d", "unsupported"),
])
def test_more_postgres_catalog_paths_are_refused(query: str, code: str) -> None:
    refused(query, "postgres", code=code)


def test_confined_table_hides_denied_columns_from_the_database_on_postgres(pg: dict[str, Any]) -> None:
    """Second wall: the database only ever sees employee_performance through its allowed columns."""
    result = check("SELECT p.employee_id FROM employee_performance p ORDER BY p.employee_id", "postgres")
    assert "id_card" not in (result.text or "")
    assert [r[0] for r in run(pg["reader"], result)] == ["E1", "E2", "E3", "E4", "E5"]
