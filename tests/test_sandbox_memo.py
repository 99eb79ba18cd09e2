"""Remembered checks (``structq.safety.sql.memo``): a query checked once is not checked again —
and nothing that should be checked again is taken from memory.

Counted, never timed: ``memo.stats()`` counts full checks and remembered ones. The invariant
behind every test: whatever the memory holds, ``check_sql`` returns exactly what a full check
of the same call returns (text, parameters, and the error when there is one), and the values
bound are always the current call's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sandbox_support import database, database_file, manifest
from sqlalchemy import bindparam, create_engine, text

from structq.agent import Engine, Plan
from structq.capabilities import CapabilitySet, load_manifest_text
from structq.errors import PlanError, SandboxViolation
from structq.safety import SafeQuery, check_sql
from structq.safety.sql import _check, memo

MEMBERS = "SELECT employee_id, name FROM employees WHERE employee_id IN (<picked>)"
VARS = {"tenant_id": 7}


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    memo.clear()
    yield
    memo.clear()


def counted(call: Callable[[], Any]) -> tuple[Any, int]:
    """``call()``'s result (or the error it raised) and how many full checks it ran."""
    before = memo.stats().checks
    try:
        result = call()
    except (SandboxViolation, PlanError) as exc:
        result = exc
    return result, memo.stats().checks - before


def full(query: str, source: Any, *, params: Any = None, vars: Any = None, max_rows: int | None = None,
         slots: Any = None) -> SafeQuery | Exception:
    """What a full check of the call returns, the memory untouched."""
    rows = source.limits.max_rows if max_rows is None else max_rows
    try:
        return _check(query, source, rows, params or {}, vars or {}, slots or {})[0]
    except (SandboxViolation, PlanError) as exc:
        return exc


def same(got: Any, want: Any) -> None:
    if isinstance(want, Exception):
        assert type(got) is type(want) and str(got) == str(want)
        return
    assert isinstance(got, SafeQuery)
    assert got == want  # every field: text, params, expanding, limit, tables, columns, names


def rows(query: SafeQuery) -> list[tuple[Any, ...]]:
    """The checked query run on the sandbox tests' SQLite database."""
    engine = create_engine("sqlite://", creator=database)
    try:
        statement = text(query.text or "")
        if query.expanding:
            statement = statement.bindparams(*(bindparam(n, expanding=True) for n in query.expanding))
        with engine.connect() as connection:
            return sorted(tuple(r) for r in connection.execute(statement, query.params))
    finally:
        engine.dispose()


# ============================================================================================
# Checked once, bound every time
# ============================================================================================


def test_the_same_query_is_checked_once() -> None:
    first, checks = counted(lambda: check_sql(MEMBERS, manifest(), params={"picked": ["E1", "E2"]}, vars=VARS))
    again, checks_again = counted(lambda: check_sql(MEMBERS, manifest(), params={"picked": ["E1", "E2"]}, vars=VARS))
    assert (checks, checks_again) == (1, 0)
    assert again == first and memo.stats().hits >= 1


def test_a_remembered_query_binds_the_current_values() -> None:
    """New reference values and another principal's variables: no check, and the rows are the
    ones those values select — never the first call's."""
    check_sql(MEMBERS, manifest(), params={"picked": ["E1", "E2"]}, vars=VARS)
    other, checks = counted(lambda: check_sql(MEMBERS, manifest(), params={"picked": ["E4", "E3"]},
                                              vars={"tenant_id": 8}))
    assert checks == 0
    same(other, full(MEMBERS, manifest(), params={"picked": ["E4", "E3"]}, vars={"tenant_id": 8}))
    assert rows(other) == [("E4", "Ann")]  # E3 belongs to tenant 7: the row filter still applies
    mine, _ = counted(lambda: check_sql(MEMBERS, manifest(), params={"picked": ["E4", "E3"]}, vars=VARS))
    assert rows(mine) == [("E3", "张伟")]


def test_a_refused_query_is_checked_and_refused_every_time() -> None:
    denied = "SELECT salary FROM employees"
    for _ in range(2):
        error, checks = counted(lambda: check_sql(denied, manifest(), vars=VARS))
        assert isinstance(error, SandboxViolation) and error.code == "denied_column" and checks == 1


def test_a_missing_variable_is_refused_after_the_query_was_remembered() -> None:
    check_sql(MEMBERS, manifest(), params={"picked": ["E1"]}, vars=VARS)
    error, checks = counted(lambda: check_sql(MEMBERS, manifest(), params={"picked": ["E1"]}, vars={}))
    assert isinstance(error, SandboxViolation) and error.code == "missing_variable" and checks == 1


def _denying(source: Any, table: str, column: str) -> Any:
    """``source`` with ``table.column`` denied: a new manifest object, as loading one makes."""
    tables = [t.model_copy(update={"columns": [c.model_copy(update={"access": "deny"}) if c.name == column else c
                                               for c in t.columns]}) if t.name == table else t
              for t in source.tables]
    return source.model_copy(update={"tables": tables})


def test_another_manifest_is_checked_against_its_own_rules() -> None:
    """The same text remembered as allowed on one manifest is refused on one that denies
    what it reads: the manifest object is part of what is remembered."""
    query = "SELECT title, budget FROM departments"
    check_sql(query, manifest(), vars=VARS)
    error, checks = counted(lambda: check_sql(query, _denying(manifest(), "departments", "budget"), vars=VARS))
    assert isinstance(error, SandboxViolation) and error.code == "denied_column" and checks == 1


# Each: (first call, a changed call) as keyword arguments of check_sql beside the query.
CHANGES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "one more space in the text": ({"query": MEMBERS}, {"query": MEMBERS.replace("FROM", "FROM ")}),
    "another letter case in the text": ({"query": MEMBERS}, {"query": MEMBERS.replace("SELECT", "select")}),
    "another dialect": ({"query": MEMBERS}, {"query": MEMBERS, "dialect": "postgres"}),
    "another row cap": ({"query": MEMBERS}, {"query": MEMBERS, "max_rows": 5}),
    "another variable set": ({"query": MEMBERS}, {"query": MEMBERS, "vars": {"tenant_id": 7, "region": "x"}}),
    "no variables": ({"query": MEMBERS}, {"query": MEMBERS, "vars": {}}),
    "another reference set": ({"query": MEMBERS}, {"query": MEMBERS, "params": {"picked": ["E1"], "other": [1]}}),
    "the reference not resolved": ({"query": MEMBERS}, {"query": MEMBERS, "params": {}}),
    "numbers instead of text (SQLite casts differ)": ({"query": MEMBERS}, {"query": MEMBERS, "params": {"picked": [1, 2]}}),
    "no values (MySQL writes FALSE)": ({"query": MEMBERS, "dialect": "mysql"},
                                       {"query": MEMBERS, "dialect": "mysql", "params": {"picked": []}}),
    "two rows for a scalar": ({"query": "SELECT name FROM employees WHERE employee_id = <picked>"},
                              {"query": "SELECT name FROM employees WHERE employee_id = <picked>",
                               "params": {"picked": ["E1", "E2"]}}),
    "a slot where there was none": ({"query": "SELECT title FROM departments WHERE dept_id = :d", "slots": {"d": 1}},
                                    {"query": "SELECT title FROM departments WHERE dept_id = :d", "slots": {}}),
}


def _call(query: str, dialect: str = "sqlite", params: Any = None, vars: Any = None, max_rows: int | None = None,
          slots: Any = None) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(the call through the memory, the same call checked in full)."""
    arguments = {"params": {"picked": ["E1"]} if params is None else params,
                 "vars": VARS if vars is None else vars, "max_rows": max_rows, "slots": slots}
    return (lambda: check_sql(query, manifest(dialect), **arguments),
            lambda: full(query, manifest(dialect), **arguments))


@pytest.mark.parametrize("first, changed", CHANGES.values(), ids=CHANGES.keys())
def test_what_changes_the_check_is_checked_again(first: dict[str, Any], changed: dict[str, Any]) -> None:
    remembered, _ = _call(**first)
    result, checks = counted(remembered)
    assert not isinstance(result, Exception), result
    call, fresh = _call(**changed)
    result, checks = counted(call)
    assert checks == 1
    same(result, fresh())


# The property: any sequence of calls, each through the memory, returns what a full check returns.
QUERIES = [
    MEMBERS,
    "SELECT name FROM employees WHERE employee_id = <picked>",
    "SELECT COUNT(*) AS n FROM project_members WHERE employee_id NOT IN (<picked>) AND employee_id IN (<picked>)",
    "SELECT title FROM departments WHERE dept_id = :d OR dept_id IN (<picked>)",
    "SELECT salary FROM employees WHERE employee_id IN (<picked>)",
    "SELECT title FROM departments WHERE title = '10:30' LIMIT 500",
]
VALUES = st.one_of(
    st.lists(st.sampled_from(["E1", "E2", "E4", "x'y", "10:30"]), max_size=3),
    st.lists(st.integers(min_value=-3, max_value=3), max_size=3),
    st.lists(st.one_of(st.none(), st.integers(0, 2), st.text(max_size=2)), max_size=3),
)
FRAMES = st.fixed_dictionaries({
    "query": st.sampled_from(QUERIES),
    "dialect": st.sampled_from(["sqlite", "postgres", "mysql"]),
    "vars": st.sampled_from([{}, {"tenant_id": 7}, {"tenant_id": 7, "x": 1}]),
    "max_rows": st.sampled_from([None, 3]),
    "slots": st.sampled_from([None, {"d": 1}]),
})


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_remembered_checks_equal_full_checks(data: st.DataObject) -> None:
    """A few calls (query, dialect, variable and slot names, row cap), each made several times
    with other values — references of any shape, other principals, other slot values."""
    memo.clear()
    frames = data.draw(st.lists(FRAMES, min_size=1, max_size=3))
    for _ in range(data.draw(st.integers(2, 10))):
        frame = dict(data.draw(st.sampled_from(frames)))
        frame["params"] = data.draw(st.one_of(st.just({}), st.fixed_dictionaries({"picked": VALUES})))
        if frame["vars"]:
            frame["vars"] = {**frame["vars"], "tenant_id": data.draw(st.sampled_from([7, 8, "7"]))}
        if frame["slots"]:
            frame["slots"] = {"d": data.draw(st.sampled_from([1, "2", None]))}
        remembered, fresh = _call(**frame)
        result, _ = counted(remembered)
        same(result, fresh())


# ============================================================================================
# A plan run again checks nothing: SQL steps, and a local step over their results
# ============================================================================================

PLAN = [
    {"output_key": "team", "source": "hr", "query": "SELECT employee_id FROM project_members WHERE project_name = '星火'"},
    {"output_key": "people", "source": "hr", "query": "SELECT employee_id, name FROM employees WHERE employee_id IN (<team>)"},
    {"output_key": "both", "source": "local",
     "query": "SELECT p.name FROM people AS p JOIN team AS t ON t.employee_id = p.employee_id ORDER BY p.name"},
]


@pytest.fixture(scope="module")
def hr_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return database_file(tmp_path_factory.mktemp("memo") / "hr.db")


def test_a_plan_run_again_checks_nothing(hr_file: Path) -> None:
    text_ = (Path(__file__).parent / "fixtures" / "sandbox" / "manifest.yaml").read_text(encoding="utf-8")
    source, _ = load_manifest_text(text_.replace("sqlite:///hr.db", f"sqlite:///{hr_file}"))
    plan = Plan.parse({"steps": PLAN})
    with Engine(CapabilitySet([source])) as engine:
        first, checks = counted(lambda: engine.run(plan, vars=VARS))
        assert checks == 3 and first.final.rows == [("李雷",), ("王芳",)]
        again, checks = counted(lambda: engine.run(plan, vars=VARS))
        assert checks == 0 and again.final.rows == first.final.rows
        other, checks = counted(lambda: engine.run(plan, vars={"tenant_id": 8}))
        assert checks == 0 and other.final.rows == [("Ann",)]  # the other tenant's rows, unchecked text
        changed = Plan.parse({"steps": [*PLAN[:2], {**PLAN[2], "query": PLAN[2]["query"] + " DESC"}]})
        last, checks = counted(lambda: engine.run(changed, vars=VARS))
        assert checks == 1 and last.final.rows == [("王芳",), ("李雷",)]


def test_remembered_checks_run_on_mariadb(mariadb_hr: tuple[str, str]) -> None:
    """MySQL's form depends on the list being empty (``FALSE``): a shape change is checked
    again, and each remembered form returns the rows its values select on the real server."""
    _, reader = mariadb_hr
    server = create_engine(reader)
    query = "SELECT employee_id FROM project_members WHERE employee_id IN (<picked>)"

    def run(values: list[str]) -> tuple[list[tuple[Any, ...]], int]:
        checked, checks = counted(lambda: check_sql(query, manifest("mysql"), params={"picked": values}))
        statement = text(checked.text).bindparams(*(bindparam(n, expanding=True) for n in checked.expanding))
        with server.connect() as connection:
            return sorted(tuple(r) for r in connection.execute(statement, checked.params)), checks

    try:
        assert run(["E1"]) == ([("E1",)], 1)
        assert run(["E2", "E3"]) == ([("E2",), ("E3",)], 0)
        assert run([]) == ([], 1)
        assert run(["E4"]) == ([("E4",)], 1)  # the non-empty form again: it replaced the empty one
    finally:
        server.dispose()


def test_postgres_long_lists_are_a_shape_of_their_own() -> None:
    """PostgreSQL writes a list of ``PG_SWITCHED_LIST`` values or more with a switch: crossing
    that length is checked again (the new form replaces the remembered one), and a remembered
    long form binds the switch False again."""
    from structq.safety.sql.rules.references import PG_SWITCHED_LIST

    source = manifest("postgres")
    short, long = [f"E{i}" for i in range(PG_SWITCHED_LIST - 1)], [f"E{i}" for i in range(PG_SWITCHED_LIST)]
    checked = {}
    for values, checks in ((short, 1), (short[::-1], 0), (long, 1), (long[::-1], 0), (short, 1)):
        checked[len(values)], counted_checks = counted(
            lambda values=values: check_sql(MEMBERS, source, params={"picked": values}, vars=VARS))
        assert counted_checks == checks
        same(checked[len(values)], full(MEMBERS, source, params={"picked": values}, vars=VARS))
    assert checked[len(long)].switches == {"ref_picked_hashed": "ref_picked"}
    assert checked[len(long)].params["ref_picked_hashed"] is False and not checked[len(short)].switches


def test_with_params_is_a_replace_of_the_values_only() -> None:
    import dataclasses

    query = check_sql("SELECT employee_id FROM employees WHERE employee_id IN (<picked>)", manifest(),
                      params={"picked": ["E1"]}, vars=VARS)
    rebound = query.with_params({"p": 1})
    assert rebound == dataclasses.replace(query, params={"p": 1})
    assert query.params != rebound.params and rebound.text == query.text
    with pytest.raises(dataclasses.FrozenInstanceError):
        rebound.text = "DELETE FROM employees"  # type: ignore[misc]


def test_built_is_the_dataclass_made_without_its_init() -> None:
    import dataclasses

    from structq.safety.query import SafeQuery

    values = {"source": "s", "kind": "sql", "limit": 11, "max_rows": 10, "text": "SELECT 1", "dialect": "sqlite",
              "tables": ("t",), "names": ("one",)}
    built, made = SafeQuery.built(**values), SafeQuery(**values)
    assert built == made and vars(built) == vars(made)
    assert built.params == {} and built.params is not SafeQuery.built(**values).params  # a factory's, each its own
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.text = "DELETE FROM t"  # type: ignore[misc]
    with pytest.raises(TypeError, match="no field 'sql'"):
        SafeQuery.built(**values, sql="SELECT 2")
