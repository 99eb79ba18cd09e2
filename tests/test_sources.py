"""The registry of source kinds (``structq.sources``): every kind provides everything the
engine, the plan validation and the CLI ask of it, and those ask the registry, not the kind's
name — so a kind added to the registry runs end to end with no other change."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

import pytest

import structq.sources as sources
from structq.agent import Engine, Plan
from structq.capabilities import CapabilitySet, Manifest
from structq.errors import PlanError
from structq.executors.base import ResultSet
from structq.executors.local import inference
from structq.safety.query import SafeQuery
from structq.sources import KINDS, Bound, SourceKind, kind_of, step_kind


def plan_of(steps: list[dict[str, Any]]) -> Plan:
    return Plan.parse({"steps": steps})


MANIFEST_KINDS = typing.get_args(Manifest.model_fields["kind"].annotation)


@pytest.mark.parametrize("manifest_kind", MANIFEST_KINDS)
def test_every_manifest_kind_has_exactly_one_source_kind(manifest_kind: str) -> None:
    serving = [kind for kind in KINDS if manifest_kind in kind.manifest_kinds]
    assert len(serving) == 1
    assert kind_of(Manifest.model_construct(source="s", kind=manifest_kind)) is serving[0]


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

    def run(self, query: SafeQuery) -> ResultSet:
        return ResultSet(columns=("text",), rows=[(query.text,)])

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
    (The echo kind stands in for a real new engine, which this test is not about.)"""
    monkeypatch.setitem(sources._BY_SOURCE, "echo", _EchoKind())
    plan = plan_of([{"output_key": "said", "source": "echo", "query": "hello"}])
    with pytest.raises(PlanError, match="text as its query"):
        plan_of([{"output_key": "said", "source": "echo", "query": {"a": 1}}]).validate_against(demo_capabilities)
    with Engine(demo_capabilities) as engine:
        assert engine.intermediate_cap(plan.steps[0]) == 10
        result = engine.run(plan)
    assert result.final.rows == [("HELLO",)]
    assert _EchoExecutor.closed == 1
