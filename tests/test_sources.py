"""The registry of source kinds (``structq.sources``): every kind provides everything the
engine, the plan validation and the CLI ask of it, and those ask the registry, not the kind's
name — so a kind added to the registry runs end to end with no other change."""

from __future__ import annotations

import importlib
import typing
from collections.abc import Callable, Mapping
from typing import Any

import pytest

import structq.capabilities.model as model
import structq.sources as sources
from structq.agent import Engine, Plan
from structq.agent.observe import observe
from structq.agent.plan import step_dialect
from structq.capabilities import CapabilitySet, Index, Manifest, Table
from structq.capabilities.references import LOCAL_DIALECT
from structq.errors import ConfigError, PlanError
from structq.executors.base import ResultSet
from structq.executors.local import inference
from structq.safety.query import SafeQuery
from structq.sources import KINDS, Bound, SourceKind, is_builtin, kind_of, per_kind, step_kind


def plan_of(steps: list[dict[str, Any]]) -> Plan:
    return Plan.parse({"steps": steps})


MANIFEST_KINDS = typing.get_args(Manifest.model_fields["kind"].annotation)


@pytest.mark.parametrize("manifest_kind", MANIFEST_KINDS)
def test_every_manifest_kind_has_exactly_one_source_kind(manifest_kind: str) -> None:
    serving = [kind for kind in KINDS if manifest_kind in kind.manifest_kinds]
    assert len(serving) == 1
    manifest = Manifest.model_construct(source="s", kind=manifest_kind)
    assert kind_of(manifest) is serving[0]
    assert manifest.object_type.word == serving[0].object_word  # the model's shape and the kind agree


def test_a_manifest_of_no_known_kind_is_a_config_error_naming_the_kinds() -> None:
    manifest = Manifest.model_construct(source="crm", kind="ftp")
    with pytest.raises(ConfigError, match="source 'crm': no source kind 'ftp'") as caught:
        kind_of(manifest)
    assert caught.value.hint is not None
    assert all(name in caught.value.hint for kind in KINDS for name in kind.manifest_kinds)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_kind_says_what_its_steps_carry(kind: SourceKind) -> None:
    assert kind.payload in (str, dict) and kind.payload_words and kind.object_word
    assert kind.manifest_kinds or kind.builtin_sources, "a kind no source can have"


def test_objects_are_what_the_manifest_declares_for_its_kind(demo_capabilities: CapabilitySet) -> None:
    for manifest in demo_capabilities:
        objects = sources.objects(manifest)
        assert objects, manifest.source
        find = manifest.index if kind_of(manifest).indexed else manifest.table
        assert all(find(o.name) is o for o in objects)


def test_local_is_a_builtin_source_and_declared_sources_go_by_their_kind(demo_capabilities: CapabilitySet) -> None:
    assert step_kind("local", demo_capabilities).name == "local"
    for manifest in demo_capabilities:
        assert step_kind(manifest.source, demo_capabilities) is kind_of(manifest)
    with pytest.raises(KeyError, match="unknown source"):
        step_kind("nowhere", demo_capabilities)


@pytest.mark.parametrize(("step", "message"), [
    ({"source": "hr", "index": "weekly_reports", "query": "SELECT name FROM employees"}, "only for search sources"),
    ({"source": "hr", "query": {"query": {"match_all": {}}}}, "SQL text"),
    ({"source": "reports", "query": {"query": {"match_all": {}}}}, "must name its index"),
    ({"source": "reports", "index": "weekly_report", "query": {}}, "did you mean 'weekly_reports'"),
    ({"source": "reports", "index": "weekly_reports", "query": "SELECT 1"}, "JSON object"),
    ({"source": "local", "query": "SELECT 1"}, "needs earlier steps"),
    ({"source": "loca", "query": "SELECT 1"}, "did you mean 'local'"),
])
def test_a_step_that_does_not_fit_its_kind_is_a_plan_error(
        demo_capabilities: CapabilitySet, step: dict[str, Any], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        plan_of([{"output_key": "s", **step}]).validate_against(demo_capabilities)


def test_a_local_step_infers_its_column_types_once(
        demo_capabilities: CapabilitySet, monkeypatch: pytest.MonkeyPatch) -> None:
    """Binding describes the local step's tables once; its sandbox check and its run share them
    (they were described twice, once for each)."""
    inferred: list[int] = []
    real = inference.infer_column_type

    def counting(values: Any) -> str:
        inferred.append(1)
        return real(values)

    monkeypatch.setattr(inference, "infer_column_type", counting)
    plan = plan_of([
        {"output_key": "staff", "source": "hr", "query": "SELECT employee_id, name FROM employees LIMIT 5"},
        {"output_key": "n", "source": "local", "query": "SELECT COUNT(*) AS n FROM staff"},
    ])
    with Engine(demo_capabilities) as engine:
        result = engine.run(plan, vars={"tenant_id": 1})
    assert result.final.rows == [(len(result.steps["staff"].rows),)]
    assert len(inferred) == 2  # staff's two columns, once each


class _EchoExecutor:
    """Answers every query with its own text: the one executor a test-only kind needs."""

    kind = "echo"
    closed = 0

    def fetch(self, query: SafeQuery) -> ResultSet:
        return ResultSet(columns=("text",), rows=[(query.text,)] if query.text else [])

    def close(self) -> None:
        type(self).closed += 1


class _EchoKind(SourceKind):
    """A kind defined here, not in structq: a built-in source whose query comes back as its row."""

    name = "echo"
    builtin_sources = ("echo",)
    payload = str
    payload_words = "text"

    def validate_step(self, step: Any, manifest: Manifest | None, earlier: Any) -> None:
        self.validate_payload(step)

    def intermediate_cap(self, manifest: Manifest | None) -> int:
        return 10

    def check(self, query: Any, manifest: Manifest, *, index: str | None, params: Mapping[str, Any],
              vars: Mapping[str, Any], max_rows: int | None,
              slots: Mapping[str, Any] | None = None) -> SafeQuery:
        return SafeQuery(source="echo", kind="sql", limit=2, max_rows=1, text=query.upper())

    def bind(self, step: Any, inputs: Mapping[str, Any], capabilities: CapabilitySet) -> Bound:
        return Bound(self, Manifest.model_construct(source="echo", kind="sql"), _EchoExecutor)


def test_a_kind_added_to_the_registry_runs_end_to_end(
        demo_capabilities: CapabilitySet, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan validation, the sandbox step and the executor all come from the registry entry.
    (The echo kind stands in for a real new kind of source, which this test is not about.)"""
    monkeypatch.setitem(sources._BY_SOURCE, "echo", _EchoKind())
    plan = plan_of([{"output_key": "said", "source": "echo", "query": "hello"}])
    with pytest.raises(PlanError, match="text as its query"):
        plan_of([{"output_key": "said", "source": "echo", "query": {"a": 1}}]).validate_against(demo_capabilities)
    with Engine(demo_capabilities) as engine:
        assert engine.intermediate_cap(plan.steps[0]) == 10
        result = engine.run(plan)
    assert result.final.rows == [("HELLO",)]
    assert _EchoExecutor.closed == 1


def test_the_remaining_places_ask_the_registry_about_a_new_builtin_kind(
        demo_capabilities: CapabilitySet, monkeypatch: pytest.MonkeyPatch) -> None:
    """The service's grant check, the observation of an empty step and the dialect references are
    read in take a built-in source from the registry: a new one needs no grant, has no
    manifest to look up and no SQL literals to match (each once compared with ``"local"``)."""
    from structq.server.config import Principal
    from structq.server.errors import AccessDenied
    from structq.server.observe import check_access

    monkeypatch.setitem(sources._BY_SOURCE, "echo", _EchoKind())
    assert is_builtin("echo") and is_builtin("local") and not is_builtin("hr")
    plan = plan_of([{"output_key": "said", "source": "echo", "query": ""}])
    check_access(Principal(user="u", sources=frozenset({"hr"})), plan)  # no grant needed
    with pytest.raises(AccessDenied):
        check_access(Principal(user="u", sources=frozenset({"hr"})),
                     plan_of([{"output_key": "r", "source": "reports", "index": "weekly_reports", "query": {}}]))
    assert step_dialect(plan.steps[0], demo_capabilities) == LOCAL_DIALECT
    with Engine(demo_capabilities) as engine:
        run = engine.run(plan)
        observed = observe(run, engine, vars={}, with_values=True)
    assert observed is not None and observed.empty == ("said",) and observed.unmatched == ()


# --- the kind-neutral accessors of the manifest model, which the registry delegates to ------


def test_the_neutral_accessors_are_what_each_kind_declares(demo_capabilities: CapabilitySet) -> None:
    """``objects``, ``object``, the words, ``members`` and ``query_dialect`` give, for every kind,
    what the code they replaced chose with ``is_search``; the registry's kinds say the same."""
    for m in demo_capabilities:
        kind = kind_of(m)
        search = kind.indexed
        assert m.objects == (m.indices if search else m.tables)
        assert (m.object_word, m.member_word) == (("index", "field") if search else ("table", "column"))
        assert m.object_word == kind.object_word
        assert (m.object_type.plural, m.object_type.member_plural) == \
            (("indices", "fields") if search else ("tables", "columns"))
        assert m.query_dialect == (None if search else m.sql_dialect)
        for obj in m.objects:
            assert m.object(obj.name) is obj
            assert list(kind.members(obj)) == (obj.fields if search else obj.columns)
            flat = obj.flat_fields() if search else {c.name: c for c in obj.columns}
            assert obj.flat_members() == flat
            assert all(obj.member(path) is member for path, member in flat.items())
            readable = obj.readable_members()
            assert all(not member.denied for member in readable.values())
            assert set(flat) - set(readable) == {p for p in flat if any(
                p == d or p.startswith(d + ".") for d, f in flat.items() if f.denied)}


def test_readable_members_leave_out_what_lies_under_a_denied_field() -> None:
    index = Index.model_validate({"name": "i", "fields": [
        {"name": "owner", "type": "object", "access": "deny", "fields": [{"name": "email", "type": "keyword"}]},
        {"name": "title", "type": "text"}]})
    assert list(index.flat_members()) == ["owner", "owner.email", "title"]
    assert list(index.readable_members()) == ["title"]
    table = Table.model_validate({"name": "t", "columns": [
        {"name": "id", "type": "integer"}, {"name": "secret", "type": "text", "access": "deny"}]})
    assert list(table.readable_members()) == ["id"]


# --- behaviour a layer above keeps per kind: one table per module, every kind in it ---------


#: (module, table) of every per-kind table; ``per_kind`` looks them up.
PER_KIND_TABLES = [("structq.sync.values", "_READERS"), ("structq.sync.samples", "_SAMPLES"),
                   ("structq.sync.samples", "_COUNTS"), ("structq.sync.introspect", "_READERS"),
                   ("structq.sync.coverage", "_BOUNDS"), ("structq.sync.diff", "_HOLD_FILTERED")]


@pytest.mark.parametrize(("module", "table"), PER_KIND_TABLES)
def test_every_per_kind_table_has_exactly_the_declared_kinds(module: str, table: str) -> None:
    entries = getattr(importlib.import_module(module), table)
    assert set(entries) == {kind.name for kind in KINDS if kind.manifest_kinds}


class _HttpExecutor:
    """Answers a path with itself: the one executor the test-only declared kind needs."""

    kind = "http"

    def fetch(self, query: SafeQuery) -> ResultSet:
        return ResultSet(columns=("path",), rows=[(query.text,)])

    def close(self) -> None:
        pass


class _HttpKind(SourceKind):
    """A declared kind that exists only here (an HTTP API whose endpoints are declared like
    tables): its module and its registry entry, and nothing else."""

    name = "http"
    manifest_kinds = ("http",)
    payload = str
    payload_words = "a path"

    def check(self, query: Any, manifest: Manifest, *, index: str | None, params: Mapping[str, Any],
              vars: Mapping[str, Any], max_rows: int | None,
              slots: Mapping[str, Any] | None = None) -> SafeQuery:
        return SafeQuery(source=manifest.source, kind="sql", limit=2, max_rows=1, text=query)

    def executor(self, manifest: Manifest) -> Any:
        return _HttpExecutor()


@pytest.fixture
def http_manifest(monkeypatch: pytest.MonkeyPatch) -> Manifest:
    monkeypatch.setitem(sources._BY_MANIFEST_KIND, "http", _HttpKind())
    monkeypatch.setitem(model._SHAPES, "http", model._Shape(Table, sql=False))
    return Manifest.model_construct(source="api", kind="http", url="http://127.0.0.1:9/", tables=[], indices=[],
                                    sync=None, schema_=None)


def test_a_declared_kind_added_to_the_registry_runs_end_to_end(
        demo_capabilities: CapabilitySet, http_manifest: Manifest) -> None:
    """Plan validation, the intermediate cap, the sandbox step and the pooled executor of a
    declared source all come from its kind's registry entry."""
    capabilities = CapabilitySet.unchecked([*demo_capabilities, http_manifest])
    plan = plan_of([{"output_key": "got", "source": "api", "query": "/status"}])
    plan.validate_against(capabilities)
    with pytest.raises(PlanError, match="a path as its query"):
        plan_of([{"output_key": "got", "source": "api", "query": {"a": 1}}]).validate_against(capabilities)
    with Engine(capabilities) as engine:
        assert engine.intermediate_cap(plan.steps[0]) == http_manifest.limits.max_intermediate_rows
        result = engine.run(plan)
    assert result.final.rows == [("/status",)]


def _sync_reads() -> list[tuple[Callable[[Manifest], Any], str]]:
    from structq.sync.coverage import measure_coverage
    from structq.sync.diff import SourceDiff
    from structq.sync.introspect import introspect
    from structq.sync.samples import distinct_counts, samples

    return [(lambda m: samples(m, [("t", "c")], 3, []), "sample reader"),
            (lambda m: distinct_counts(m, [("t", "c")], 3, []), "distinct-value counter"),
            (introspect, "schema reader"),
            (lambda m: measure_coverage(m, SourceDiff("api", None)), "coverage reader")]


@pytest.mark.parametrize(("read", "what"), _sync_reads(), ids=lambda x: x if isinstance(x, str) else "")
def test_a_kind_without_a_sync_reader_fails_by_name(
        http_manifest: Manifest, read: Callable[[Manifest], Any], what: str) -> None:
    """Not the SQL branch by default: the error names the source, the kind and what it lacks."""
    with pytest.raises(ConfigError, match=f"source 'api': source kind 'http' has no {what}") as caught:
        read(http_manifest)
    assert caught.value.hint == "kinds with one: " + ", ".join(sorted(k.name for k in KINDS if k.manifest_kinds))


def test_per_kind_finds_each_declared_kind(demo_capabilities: CapabilitySet) -> None:
    table = {kind.name: kind for kind in KINDS}
    for m in demo_capabilities:
        assert per_kind(table, m, "anything") is kind_of(m)


@pytest.mark.parametrize("every", [True, False])
def test_a_kinds_value_step_is_a_step_its_own_sandbox_accepts(demo_capabilities: CapabilitySet, every: bool) -> None:
    """The entity-slot lookup of templated plans asks the kind for its query: for every demo
    source and readable text member, it is a valid plan step that the kind's sandbox accepts
    with the looked-up text bound as the ``:value`` parameter."""
    from structq.linking.values import eligible_columns

    checked = set()
    for manifest in demo_capabilities:
        kind = kind_of(manifest)
        for obj, member in eligible_columns(manifest)[:3]:
            plan = Plan.parse({"steps": [kind.value_step(manifest, obj, member, every=every)]})
            plan.validate_against(demo_capabilities)
            step = plan.steps[0]
            safe = kind.check(step.query, manifest, index=step.index, params={}, vars={"tenant_id": 1},
                              max_rows=None, slots=None if every else {"value": "x"})
            assert member in (safe.columns if kind.indexed else {c.split(".", 1)[-1] for c in safe.columns})
            checked.add(kind.name)
    assert checked == {kind_of(m).name for m in demo_capabilities}


@pytest.mark.parametrize("manifest_kind", MANIFEST_KINDS)
def test_every_manifest_kind_names_its_executor(manifest_kind: str) -> None:
    """The registry is the only place a ``kind:`` meets its executor (executors do not
    register themselves), and what it names answers to ``fetch`` only: ``Executor.run`` was
    ``fetch``'s former name and is gone."""
    manifest = Manifest.model_construct(source="s", kind=manifest_kind)
    executor = kind_of(manifest).executor_class(manifest)
    assert callable(executor.fetch) and callable(executor.close) and not hasattr(executor, "run")


def test_a_kind_serves_the_manifest_kinds_it_names_an_executor_for() -> None:
    """``manifest_kinds`` is read from ``executors``: one list, so a kind cannot serve a ``kind:``
    it has no executor for, nor name an executor for one it does not serve."""
    assert all(kind.manifest_kinds == tuple(kind.executors) for kind in KINDS)

    class DuckKind(SourceKind):
        name = "duck"
        executors = {"duckdb": "elsewhere:DuckExecutor", "motherduck": "elsewhere:DuckExecutor"}

    class SharedDuckKind(DuckKind):
        name = "shared duck"

    assert DuckKind.manifest_kinds == DuckKind().manifest_kinds == SharedDuckKind.manifest_kinds == (
        "duckdb", "motherduck")
    with pytest.raises(TypeError, match="declare executors only"):
        class BothKind(SourceKind):
            executors = {"duckdb": "elsewhere:DuckExecutor"}
            manifest_kinds = ("duckdb",)


def test_a_kind_without_an_executor_for_the_manifest_is_a_config_error() -> None:
    manifest = Manifest.model_construct(source="crm", kind="graphql")
    sql = kind_of(Manifest.model_construct(source="db", kind="sql"))
    with pytest.raises(ConfigError, match="source 'crm': SQL sources have no executor for kind 'graphql'") as caught:
        sql.executor(manifest)
    assert caught.value.hint == "set kind: to one of sql"


def test_the_registry_imports_no_executor() -> None:
    """Each kind names its executor as a string: importing the registry (every CLI command
    does) loads no database driver or search client."""
    import subprocess
    import sys

    code = ("import sys, structq.sources; print(sorted(m for m in sys.modules "
            "if m.startswith('structq.executors.') and m != 'structq.executors.base'))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
