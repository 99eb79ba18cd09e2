"""Hostile queries against the resource limits, by class, on SQLite, PostgreSQL and MariaDB.

A query may never run (on the server or in the structq process) longer than ``timeout_s`` plus a
second. ``test_sandbox_hostile_exec.py`` runs the hostile corpus; this module runs one query per
*class* of resource attack (catastrophic regular expressions, long or computed patterns,
string-growing calls, compounding growth in recursive queries, matches over aggregated text,
plain slow statements) through the real path: ``check_sql`` then ``SqlExecutor``.

Each class either is refused by the sandbox with its code, or runs with the expected outcome
(rows, or ``QueryTimeout`` for a statement that would run for hours) and is then gone: once the
call has returned, no statement of the reading account is left in ``pg_stat_activity`` /
``PROCESSLIST``, found by polling. No test asserts how long anything took: the polls are bounded
only so that a hang becomes a failure, far beyond ``timeout_s`` and far short of the hours a
statement that was never stopped would run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import sqlalchemy as sa

from corpora import hostile_manifest
from servers import MariaDBServer, PostgresServer
from structq.capabilities.model import Limits, Manifest
from structq.errors import ExecutionError, QueryTimeout, SandboxViolation
from structq.executors.base import ResultSet
from structq.executors.local import LocalExecutor
from structq.executors.sql import SqlExecutor
from structq.safety import SafeQuery, check_sql
from test_sandbox_hostile_exec import load_tables

TIMEOUT_S = 2.0
#: Only turns a hang into a failure, never a measure of speed: every statement here either ends
#: at once or runs for hours (COUNT_FOREVER), so a call still waiting, or a statement still on
#: the server, this long after the call returned was never stopped. How fast the timeout acts
#: is a duration, measured by bench scripts, not asserted by tests (a loaded machine is slow).
HANG_GUARD_S = 60.0
POLL_S = 0.05
DATABASE = "sandbox_hostile_limits"
READER, READER_PASSWORD = "limits_reader", "r3ad-only"
#: A statement the sandbox accepts that runs for hours: counting the 3**20 rows of a cross join
#: (cancellable between rows; MariaDB stops recursive CTEs after 1,000 iterations, so no CTE).
COUNT_FOREVER = "SELECT count(*) AS c FROM " + ", ".join(f"users AS u{i}" for i in range(20))


# ============================================================================================
# The classes
# ============================================================================================


@dataclass(frozen=True)
class Attack:
    """One class of resource attack: a query per dialect, and what must become of it."""

    name: str
    queries: dict[str, str]
    #: The sandbox's code when the class is refused; None when it runs, bounded.
    refused_with: str | None
    params: dict[str, list[Any]] = field(default_factory=dict)
    #: Whether it must end in ``QueryTimeout`` (rather than in rows or a database error).
    times_out: bool = False

    def query(self, dialect: str) -> str:
        return self.queries.get(dialect, self.queries.get("*", ""))


_P100 = "%" + "a" * 97 + "b%"  # the longest pattern allowed, adversarial for LIKE's backtracking

ATTACKS = [
    # --- regular expressions --------------------------------------------------------------
    Attack("catastrophic regex over a built string (runs: RE2 on SQLite, the databases' own elsewhere)", {
        "sqlite": "SELECT u.id FROM users AS u WHERE replace(printf('%1000c', '!'), ' ', 'a') REGEXP '(a+)+$'",
        "postgres": "SELECT u.id FROM users AS u WHERE replace(lpad('!', 1000, ' '), ' ', 'a') ~ '(a+)+$'",
        "mysql": "SELECT u.id FROM users AS u WHERE REPLACE(LPAD('!', 1000, ' '), ' ', 'a') REGEXP '(a+)+$'",
    }, None),
    Attack("regex pattern from a column", {
        "sqlite": "SELECT u.id FROM users AS u WHERE u.name REGEXP u.username",
        "postgres": "SELECT u.id FROM users AS u WHERE u.name ~ u.username",
        "mysql": "SELECT u.id FROM users AS u WHERE u.name REGEXP u.username",
    }, "pattern"),
    Attack("regex pattern from an earlier step", {
        "sqlite": "SELECT u.id FROM users AS u WHERE u.name REGEXP <p>",
        "postgres": "SELECT u.id FROM users AS u WHERE regexp_match(u.name, <p>) IS NOT NULL",
        "mysql": "SELECT u.id FROM users AS u WHERE u.name REGEXP <p>",
    }, "pattern", {"p": ["(a+)+$"]}),
    Attack("regex pattern computed", {"*": "SELECT u.id FROM users AS u WHERE u.name REGEXP repeat('(a+)+', 3)",
                                      "postgres": "SELECT u.id FROM users AS u WHERE u.name ~ repeat('(a+)+', 3)"},
           "pattern"),
    Attack("regex pattern too long", {"*": "SELECT u.id FROM users AS u WHERE u.name REGEXP '" + "(a|b)" * 30 + "'",
                                      "postgres": "SELECT u.id FROM users AS u WHERE u.name ~ '" + "(a|b)" * 30 + "'"},
           "pattern"),
    # --- LIKE / GLOB ----------------------------------------------------------------------
    Attack("longest LIKE pattern over the longest string a query may build (runs)", {
        "*": f"SELECT u.id FROM users AS u WHERE repeat(repeat('a', 1000), 10) LIKE '{_P100}'",
        "sqlite": f"SELECT u.id FROM users AS u WHERE replace(printf('%990c', ' '), ' ', 'aaaaaaaaaa') LIKE '{_P100}'",
    }, None),
    Attack("LIKE pattern too long", {"*": "SELECT u.id FROM users AS u WHERE u.name LIKE '%" + "a%" * 500 + "'"},
           "pattern"),
    Attack("LIKE pattern from the data", {
        "*": "SELECT u.id FROM users AS u WHERE u.name LIKE '%' || u.username || '%'",
        "mysql": "SELECT u.id FROM users AS u WHERE u.name LIKE CONCAT('%', u.username, '%')",
    }, "pattern"),
    Attack("GLOB pattern from an earlier step", {"sqlite": "SELECT u.id FROM users AS u WHERE u.name GLOB <p>"},
           "pattern", {"p": ["*a*a*a*b"]}),
    Attack("LIKE over text aggregated from a cross join", {
        "sqlite": "SELECT x.s FROM (SELECT group_concat(a.name) AS s FROM users AS a, users AS b) AS x "
                  "WHERE x.s LIKE '%a%b%'",
        "postgres": "SELECT x.s FROM (SELECT string_agg(a.name, ',') AS s FROM users AS a, users AS b) AS x "
                    "WHERE x.s LIKE '%a%b%'",
        "mysql": "SELECT x.s FROM (SELECT GROUP_CONCAT(a.name) AS s FROM users AS a, users AS b) AS x "
                 "WHERE x.s LIKE '%a%b%'",
    }, "pattern"),
    # --- strings built in the query -------------------------------------------------------
    Attack("repeat with a size computed from the data", {
        "*": "SELECT repeat('a', u.id * 500000) LIKE 'a%' AS m FROM users AS u",
        "sqlite": "SELECT printf('%.*c', u.id * 500000, 'a') LIKE 'a%' AS m FROM users AS u",
    }, "string_size"),
    Attack("padding to a size computed from the data", {
        "*": "SELECT lpad(u.name, u.id * 500000, 'x') AS m FROM users AS u",
        "sqlite": "SELECT printf('%*d', u.id * 500000, 1) AS m FROM users AS u",
    }, "string_size"),
    Attack("nested repeats of data values", {"*": "SELECT repeat(repeat(u.name, 10), 10) AS m FROM users AS u",
                                             "sqlite": "SELECT replace(replace(u.name, 'a', 'aaaaaaaaaa'), 'a', "
                                                       "'aaaaaaaaaa') AS m FROM users AS u"},
           "string_size"),
    Attack("replace chain", {"*": "SELECT replace(replace(replace(u.name, 'a', 'aaaaaaaaaa'), 'a', 'aaaaaaaaaa'), "
                                  "'a', 'aaaaaaaaaa') AS m FROM users AS u"}, "string_size"),
    Attack("replacement taken from the data", {"*": "SELECT replace(u.name, 'a', u.email) AS m FROM users AS u"},
           "string_size"),
    Attack("constant string bomb", {"*": "SELECT repeat(repeat('a', 1000), 1000) AS m FROM users AS u",
                                    "sqlite": "SELECT replace(printf('%1000c', ' '), ' ', printf('%1000c', 'a')) "
                                              "AS m FROM users AS u"},
           "string_size"),
    Attack("doubling in a recursive query", {
        "*": "WITH RECURSIVE r(s, n) AS (SELECT 'a', 1 UNION ALL SELECT r.s || r.s, r.n + 1 FROM r WHERE r.n < 40) "
             "SELECT length(r.s) AS l FROM r",
        "mysql": "WITH RECURSIVE r(s, n) AS (SELECT 'a', 1 UNION ALL SELECT CONCAT(r.s, r.s), r.n + 1 FROM r "
                 "WHERE r.n < 40) SELECT LENGTH(r.s) AS l FROM r",
    }, "string_size"),
    # --- plain slowness -------------------------------------------------------------------
    Attack("statement slower than the timeout (runs: cancelled on the server)", {"*": COUNT_FOREVER}, None,
           times_out=True),
]


# ============================================================================================
# The databases, each with a way to see what the reading account still runs
# ============================================================================================


@dataclass
class Engine:
    dialect: str
    url: str
    #: Whether a statement of the reading account is still running on the server.
    busy: Callable[[], bool]
    admin: sa.Engine | None = None

    def manifest(self) -> Manifest:
        return hostile_manifest(self.dialect).model_copy(
            update={"url": self.url, "limits": Limits(max_rows=50, timeout_s=TIMEOUT_S)})


def _server_engine(server: PostgresServer | MariaDBServer, dialect: str, activity: str) -> Engine:
    admin = sa.create_engine(server.create_database(DATABASE))
    load_tables(admin)
    url = server.create_readonly_user(DATABASE, READER, READER_PASSWORD)

    def busy() -> bool:
        with admin.connect() as conn:
            return bool(conn.execute(sa.text(activity), {"user": READER}).scalar())

    return Engine(dialect, url, busy, admin)


PG_ACTIVITY = ("SELECT count(*) FROM pg_stat_activity WHERE usename = :user AND state <> 'idle' "
               "AND pid <> pg_backend_pid()")
MARIADB_ACTIVITY = "SELECT count(*) FROM information_schema.PROCESSLIST WHERE USER = :user AND COMMAND <> 'Sleep'"


@pytest.fixture(scope="module", params=["sqlite", "postgres", "mariadb"])
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("limits") / "hostile.db"
        admin = sa.create_engine(f"sqlite:///{path}")
        load_tables(admin)
        admin.dispose()
        yield Engine("sqlite", f"sqlite:///{path}", lambda: False)
        return
    if request.param == "postgres":
        found = _server_engine(request.getfixturevalue("pg_server"), "postgres", PG_ACTIVITY)
    else:
        found = _server_engine(request.getfixturevalue("mariadb_server"), "mysql", MARIADB_ACTIVITY)
    yield found
    assert found.admin is not None
    found.admin.dispose()


# ============================================================================================
# Running one query and watching it go
# ============================================================================================


@dataclass
class Run:
    """A query run by ``SqlExecutor`` on a worker thread: its result or error when done."""

    outcome: list[Any] = field(default_factory=list)
    thread: threading.Thread | None = None

    @classmethod
    def start(cls, executor: SqlExecutor, safe: SafeQuery) -> Run:
        run = cls()

        def work() -> None:
            try:
                run.outcome.append(executor.fetch(safe))
            except ExecutionError as error:
                run.outcome.append(error)

        run.thread = threading.Thread(target=work, daemon=True)
        run.thread.start()
        return run

    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


def gone(still_running: Callable[[], bool]) -> bool:
    """Poll ``still_running`` until it is false; False when it still is after ``HANG_GUARD_S``."""
    give_up = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < give_up:
        if not still_running():
            return True
        time.sleep(POLL_S)
    return not still_running()


def run_and_watch(engine: Engine, safe: SafeQuery, executor: SqlExecutor) -> Run:
    """Run ``safe``; assert that the call returns and that, once it has, no statement of it is
    left running on the server (the outcome of the timeout, not its speed)."""
    run = Run.start(executor, safe)
    assert gone(run.running), f"the call has not returned {HANG_GUARD_S:g} s after the start"
    assert gone(engine.busy), f"the statement still runs on the server {HANG_GUARD_S:g} s after the call returned"
    return run


# ============================================================================================
# Tests
# ============================================================================================


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_resource_attack_is_refused_or_bounded(engine: Engine, attack: Attack) -> None:
    query = attack.query(engine.dialect)
    if not query:
        pytest.skip(f"{attack.name}: no such construct on {engine.dialect}")
    manifest = engine.manifest()
    try:
        safe = check_sql(query, manifest, params=attack.params)
    except SandboxViolation as violation:
        assert attack.refused_with == violation.code, f"refused as {violation.code}: {violation}"
        return
    assert attack.refused_with is None, f"accepted, expected a {attack.refused_with!r} refusal:\n{safe.text}"
    executor = SqlExecutor(manifest)
    try:
        run = run_and_watch(engine, safe, executor)
    finally:
        executor.close()
    timed_out = bool(run.outcome) and isinstance(run.outcome[0], QueryTimeout)
    assert timed_out == attack.times_out, run.outcome


def test_a_statement_the_server_timeout_misses_is_cancelled_on_the_server(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the server's own timeout gone (the setup statement dropped), the backstop still
    stops the statement on the server: PostgreSQL's cancel, MariaDB's KILL QUERY."""
    if engine.dialect == "sqlite":
        pytest.skip("SQLite runs in the process: its deadline is the executor's own")
    executor = SqlExecutor(engine.manifest())
    backend = type(executor._backend)
    setup = backend.setup
    monkeypatch.setattr(backend, "setup", lambda self, connection, timeout_s: [
        step for step in setup(self, connection, timeout_s) if "time" not in step.sql])
    safe = check_sql(COUNT_FOREVER, engine.manifest())
    try:
        run = run_and_watch(engine, safe, executor)
        assert run.outcome and isinstance(run.outcome[0], QueryTimeout), run.outcome
    finally:
        executor.close()


def test_sqlite_regexp_is_re2_and_keeps_other_threads_running(engine: Engine) -> None:
    """A catastrophic pattern for a backtracking matcher returns at once, and a pattern RE2
    cannot run (a back-reference) is an error that says so, not a fallback to ``re``."""
    if engine.dialect != "sqlite":
        pytest.skip("REGEXP is registered by the executor on SQLite only")
    executor = SqlExecutor(engine.manifest())
    try:
        query = ("SELECT u.id FROM users AS u WHERE replace(printf('%1000c', '!'), ' ', 'a') || u.name "
                 "REGEXP '^(a+)+$' OR u.name REGEXP '^al'")
        run = run_and_watch(engine, check_sql(query, engine.manifest()), executor)
        assert [tuple(row) for row in run.outcome[0].rows] == [(1,)]
        with pytest.raises(ExecutionError) as caught:
            executor.fetch(check_sql(r"SELECT u.id FROM users AS u WHERE u.name REGEXP '(a)\1'", engine.manifest()))
        assert "RE2" in (caught.value.hint or "")
    finally:
        executor.close()


def test_sqlite_like_pattern_limit_holds_for_bound_patterns(engine: Engine) -> None:
    """The connection's own LIKE pattern limit is the second guard behind the sandbox's rule:
    a pattern that reaches SQLite some other way (bound, here) is refused by SQLite itself."""
    if engine.dialect != "sqlite":
        pytest.skip("SQLITE_LIMIT_LIKE_PATTERN_LENGTH is SQLite's")
    executor = SqlExecutor(engine.manifest())
    long_pattern = "%" + "a%" * 500
    query = SafeQuery(source="hostile", kind="sql", limit=51, max_rows=50,
                      text="SELECT u.id FROM users AS u WHERE u.name LIKE :p", params={"p": long_pattern})
    try:
        with pytest.raises(ExecutionError, match="too complex"):
            executor.fetch(query)
        assert executor.fetch(SafeQuery(source="hostile", kind="sql", limit=51, max_rows=50,
                                      text="SELECT u.id FROM users AS u WHERE u.name LIKE :p",
                                      params={"p": "%ob%"})).rows == [(2,)]
    finally:
        executor.close()


def test_local_executor_regexp_is_re2() -> None:
    """Steps' results queried locally (an in-memory SQLite) get the same REGEXP."""
    rows = [("a" * 1000 + "!",), ("abc",)]
    executor = LocalExecutor({"t": ResultSet(columns=("x",), rows=rows)}, timeout_s=TIMEOUT_S)
    query = SafeQuery(source="local", kind="sql", limit=11, max_rows=10,
                      text="SELECT length(x) AS n FROM t WHERE x REGEXP '^(a+)+$' OR x REGEXP '^ab'")
    found: list[Any] = []
    worker = threading.Thread(target=lambda: found.append(executor.fetch(query)), daemon=True)
    worker.start()
    assert gone(worker.is_alive)  # a backtracking matcher would take longer than the universe's age
    assert [tuple(row) for row in found[0].rows] == [(3,)]
