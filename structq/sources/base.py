"""What a kind of source provides, and a step bound to its source.

A ``SourceKind`` is everything the rest of structq needs to know about one kind of source:
the manifest ``kind:`` values it serves (``manifest_kinds``, read from ``executors``), what a step's query is
(``payload``), the objects a manifest declares (tables, indices) and their members (columns,
fields), how a step is checked against its source's shape (``validate_step``) and by the
sandbox (``check``), which executor runs it (``executors``, imported on first use by
``executor``), and how many rows a step may pass on (``intermediate_cap``). Code that would otherwise ask
"is this a search source?" asks the kind instead, so a new kind is one module and one entry
in the registry (``structq.sources``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from structq.capabilities.objects import Table
from structq.errors import ConfigError, PlanError

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet, Manifest
    from structq.executors.base import Executor
    from structq.safety.query import SafeQuery

__all__ = ["Bound", "Rows", "SourceKind", "StepLike"]


class StepLike(Protocol):
    """The parts of a plan step a kind reads (``agent.plan.Step`` has them)."""

    output_key: str
    source: str
    index: str | None
    query: Any


class Rows(Protocol):
    """An earlier step's result, as a kind reads it (``ResultSet``, ``StepResult``)."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


@dataclass(frozen=True)
class Bound:
    """One step bound to its source: the kind, the manifest its query is checked against,
    and, for a source that exists only for the step (``local``), how to open its executor.

    ``open`` is None for a declared source: its executor is ``Engine``'s pooled one, behind
    the circuit breaker. Built once per step run, so what binding costs (a local step's
    column types) is paid once for the check and the run."""

    kind: "SourceKind"
    manifest: "Manifest"
    open: Callable[[], "Executor"] | None = None

    def check(self, step: StepLike, *, params: Mapping[str, Any], vars: Mapping[str, Any],
              max_rows: int | None, slots: Mapping[str, Any] | None = None) -> "SafeQuery":
        """The step's query through the sandbox of its kind (``slots``: a template plan's
        slot values, bound as parameters)."""
        return self.kind.check_step(step, self.manifest, params=params, vars=vars, max_rows=max_rows, slots=slots)


class SourceKind:
    """One kind of source. Subclasses set the class attributes and the methods that differ."""

    #: The registry's name for the kind.
    name: ClassVar[str]
    #: The manifest ``kind:`` values it serves: the keys of ``executors``, set when a subclass
    #: defines them (``__init_subclass__``), so the two cannot disagree. A kind that makes its
    #: executors itself (overriding ``executor``) declares them instead.
    manifest_kinds: ClassVar[tuple[str, ...]] = ()
    #: Source names that exist without a manifest and are of this kind (``local``).
    builtin_sources: ClassVar[tuple[str, ...]] = ()
    #: What a step's ``query`` is: ``str`` (SQL text) or ``dict`` (a DSL body).
    payload: ClassVar[type]
    #: The payload in words, for the error that says a step's query has the wrong type.
    payload_words: ClassVar[str]
    #: Whether a step names one of the source's objects (``index:``) besides its query.
    indexed: ClassVar[bool] = False
    #: What the manifest's objects are called ("table", "index"): the model's word for them.
    object_word: ClassVar[str] = Table.word
    #: Whether every distinct value of a member can be read in one query (a search
    #: aggregation's buckets are capped, so a search field's values are looked up one at a time).
    lists_values: ClassVar[bool] = True
    #: Manifest ``kind:`` → its executor class, as ``"module:Class"``: imported on first use, so
    #: importing the registry imports no database driver or client library.
    executors: ClassVar[Mapping[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "executors" not in vars(cls):
            return
        if "manifest_kinds" in vars(cls):
            raise TypeError(f"{cls.__name__}: manifest_kinds is read from executors; declare executors only")
        cls.manifest_kinds = tuple(cls.executors)

    def objects(self, manifest: "Manifest") -> Sequence[Any]:
        """The tables or indices ``manifest`` declares (``Manifest.objects``)."""
        return manifest.objects

    def members(self, obj: Any) -> Sequence[Any]:
        """The columns or fields of one of ``objects``, as declared (``Table.members``)."""
        return obj.members

    def value_step(self, manifest: "Manifest", obj: str, member: str, *, every: bool) -> dict[str, Any]:
        """A plan step reading ``member`` of ``obj``: every distinct value (``every``), or the
        stored values equal to the parameter ``:value``."""
        raise NotImplementedError(f"source kind {self.name!r} cannot look up stored values")

    def probe(self, executor: Any, manifest: "Manifest") -> None:
        """Reach the source once with the service's own fixed query (reads no row and no
        column, so it goes to the executor directly, not through the sandbox); raises when the
        source does not answer."""
        executor.ping()

    def read_payload(self, text: str) -> Any:
        """A query typed as text (``structq sandbox``) as this kind's payload; a
        ``PlanError`` when it cannot be."""
        return text

    def validate_step(self, step: StepLike, manifest: "Manifest | None", earlier: Sequence[str]) -> None:
        """A ``PlanError`` when ``step`` does not fit its source's shape (its index, its
        payload type); ``manifest`` is None for a built-in source."""
        if step.index:
            raise PlanError(f"source {step.source!r} is SQL; 'index' is only for search sources",
                            step=step.output_key)
        self.validate_payload(step)

    def validate_payload(self, step: StepLike) -> None:
        if not isinstance(step.query, self.payload):
            raise PlanError(f"a step on {self.name} source {step.source!r} has {self.payload_words} as its query",
                            step=step.output_key)

    def check(self, query: Any, manifest: "Manifest", *, index: str | None, params: Mapping[str, Any],
              vars: Mapping[str, Any], max_rows: int | None,
              slots: Mapping[str, Any] | None = None) -> "SafeQuery":
        """``query`` through the sandbox: the rewritten query that may run, or ``SandboxViolation``."""
        raise NotImplementedError

    def check_step(self, step: StepLike, manifest: "Manifest", *, params: Mapping[str, Any], vars: Mapping[str, Any],
                   max_rows: int | None, slots: Mapping[str, Any] | None = None) -> "SafeQuery":
        """``step`` through the sandbox: its query (a kind whose steps carry more than a query,
        an API's variables or operation and params, reads them here)."""
        return self.check(step.query, manifest, index=step.index, params=params, vars=vars, max_rows=max_rows,
                          slots=slots)

    def executor_class(self, manifest: "Manifest") -> type:
        """The class that runs ``manifest``'s queries (``executors``), imported now."""
        try:
            module, _, name = self.executors[manifest.kind].partition(":")
        except KeyError:
            served = ", ".join(sorted(self.executors)) or "another kind"
            raise ConfigError(f"source {manifest.source!r}: {self.name} sources have no executor for "
                              f"kind {manifest.kind!r}", hint=f"set kind: to one of {served}") from None
        return getattr(importlib.import_module(module), name)

    def executor(self, manifest: "Manifest") -> "Executor":
        """A new executor for ``manifest``'s source (``Engine`` pools it)."""
        return self.executor_class(manifest)(manifest)

    def intermediate_cap(self, manifest: "Manifest | None") -> int:
        """Most rows a step may pass on to later steps."""
        assert manifest is not None
        return manifest.limits.max_intermediate_rows

    def tables_read(self, step: StepLike, earlier: Sequence[str]) -> list[str]:
        """Earlier output keys ``step`` reads as whole tables (beyond its ``<references>``)."""
        return []

    def bind(self, step: StepLike, inputs: Mapping[str, Rows], capabilities: "CapabilitySet") -> Bound:
        """``step`` bound to its declared source (``inputs`` are the results it depends on)."""
        return Bound(self, capabilities[step.source])
