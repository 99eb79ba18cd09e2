"""What every check of one search request shares: the index's fields, the caps, the caller's
values, and how a refusal is worded.

A ``Context`` lives for one ``check_dsl`` call. Besides the read-only facts (fields, limit,
reference values, variables) it accumulates what the request reads (``columns``) and which
reference values it used (``used``), so the ``SafeQuery`` can report both for audit.

What it reads from the index (its fields by path, which are denied, the ``_source`` paths of
the readable ones: ``IndexFacts``) is derived once per index object and kept while it lives
(``safety/per_object.py``): derived on every check, it made a check of a 1,000-field index
cost 2 ms instead of 0.1.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn

from structq.capabilities.hints import closest, listing
from structq.capabilities.model import Index, Manifest, SearchField
from structq.capabilities.references import REFERENCE, value_reference
from structq.errors import PlanError, SandboxViolation

from ..per_object import PerObject

__all__ = ["Context", "JsonPath", "Scalar", "SCALAR_TYPES", "PLAIN_TYPES", "REASONS", "format_path", "closest_hint"]

#: Where a value stands in the request body: keys and list positions from the root.
JsonPath = tuple[str | int, ...]

Scalar = str | int | float | bool
SCALAR_TYPES = (str, int, float, bool)
#: What a reference value may be: a JSON scalar, or null (a missing value in a row).
PLAIN_TYPES = (*SCALAR_TYPES, type(None))

#: Why a clause, aggregation or key that callers are likely to try is refused. The hint
#: carries the reason, so a planner repairing its request learns what to do instead.
REASONS: Mapping[str, str] = {
    "query_string": "its syntax can name any field (field:value) and runs regular expressions; "
                    "use simple_query_string with explicit 'fields', match or multi_match",
    "regexp": "regular expressions can be arbitrarily expensive; use prefix, match, or wildcard "
              "without a leading * or ?",
    "more_like_this": "it reads other documents, from any index",
    "percolate": "it reads stored queries from other documents",
    "wrapper": "it carries an encoded query the sandbox cannot check",
    "has_child": "joins read other documents", "has_parent": "joins read other documents",
    "parent_id": "joins read other documents",
    "terms_set": "it needs a script or a per-document field to count matches",
    "global": "it escapes the query, and with it the row filters",
    "significant_terms": "its background statistics cover the whole index, outside the row filters",
    "significant_text": "its background statistics cover the whole index, outside the row filters",
    "suggest": "suggesters read the index-wide term dictionary, outside the row filters",
    "inner_hits": "it returns nested documents with their whole source; query the nested fields "
                  "and choose them with _source",
    "stored_fields": "stored fields bypass the _source restriction; use _source or fields",
    "pit": "point-in-time searches need other endpoints; page with search_after",
    "indices_boost": "it names other indices",
    "profile": "it exposes execution internals", "explain": "it exposes index statistics",
    "rescore": "rescoring runs a second query the row filters do not see",
    "knn": "vector search is not available", "ext": "plugin extensions cannot be checked",
    "slice": "sliced scrolls need other endpoints", "stats": "stats groups are not needed",
    "timeout": "the executor sets the timeout from the manifest",
}


def format_path(path: JsonPath) -> str:
    """``("query", "bool", "filter", 1, "script")`` → ``query.bool.filter[1].script``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(body)"


def closest_hint(word: str, options: Iterable[str], *, what: str) -> str:
    """"did you mean …?" when something is close, and always the list of what is allowed
    (``hints.listing``: the closest ones of a long list)."""
    options = sorted(options)
    match = closest(word, options)
    allowed = f"{what}: {listing(options, near=word) or '(none)'}"
    return f"did you mean {match!r}? {allowed}" if match else allowed


def _is_denied(path: str, fields: Mapping[str, SearchField]) -> bool:
    """A field is denied when it or any object it sits in is ``access: deny``."""
    parts = path.split(".")
    return any(
        (f := fields.get(".".join(parts[: n + 1]))) is not None and f.denied for n in range(len(parts))
    )


def _allowed_source(fields: Sequence[SearchField], prefix: str = "") -> list[str]:
    """The fewest ``_source`` paths that return every allowed field and no denied one: a
    whole object when nothing under it is denied, else its allowed parts one by one."""
    out: list[str] = []
    for f in fields:
        path = prefix + f.name
        if f.denied:
            continue
        if _has_denied_below(f):
            out += _allowed_source(f.fields, path + ".")
        else:
            out.append(path)
    return out


def _has_denied_below(f: SearchField) -> bool:
    return any(sub.denied or _has_denied_below(sub) for sub in f.fields)


@dataclass(frozen=True)
class IndexFacts:
    """What every check of one index reads from its declaration."""

    #: Every field by its full dotted path, sub-fields included.
    fields: Mapping[str, SearchField]
    #: Paths of the fields that are denied or sit in a denied object.
    denied: frozenset[str]
    #: Paths of the objects with a denied field somewhere below.
    hiding: frozenset[str]
    #: The fewest ``_source`` paths that return every readable field (``_allowed_source``).
    source_paths: tuple[str, ...]
    #: The paths of the readable fields, in declaration order.
    allowed_fields: tuple[str, ...]

    @classmethod
    def of(cls, index: Index) -> "IndexFacts":
        fields = index.flat_fields()
        denied = frozenset(p for p in fields if _is_denied(p, fields))
        return cls(
            fields=fields,
            denied=denied,
            hiding=frozenset(p for p, f in fields.items() if _has_denied_below(f)),
            source_paths=tuple(_allowed_source(index.fields)),
            allowed_fields=tuple(p for p in fields if p not in denied),
        )


_facts: PerObject[Index, IndexFacts] = PerObject()


@dataclass
class Context:
    """One check: the manifest's facts about the index, the caps, and what the request reads."""

    source: Manifest
    index: Index
    limit: int
    max_rows: int
    params: Mapping[str, Sequence[Any]]
    vars: Mapping[str, Any]
    #: A template plan's slot values: the whole string ``":name"`` is that one value.
    slots: Mapping[str, Any] = field(default_factory=dict)
    fields: Mapping[str, SearchField] = field(init=False)
    denied: frozenset[str] = field(init=False)
    hiding: frozenset[str] = field(init=False)
    source_paths: tuple[str, ...] = field(init=False)
    allowed_fields: tuple[str, ...] = field(init=False)
    #: Fields the request reads, in order of first use (a dict keeps the order, without repeats).
    columns: dict[str, None] = field(default_factory=dict)
    #: Values bound into the request, for audit: references by their text (``key`` or
    #: ``key.column``), row-filter variables by name.
    used: dict[str, Any] = field(default_factory=dict)
    #: How many buckets the aggregations enclosing the one being checked can make together
    #: (the product of their bucket counts): every ``top_hits`` below returns its documents
    #: once per bucket.
    buckets: int = 1
    #: The index has a row filter: the request must answer the same whether or not other
    #: tenants' documents exist (see ``_tenant``), so index-wide statistics stay out of it.
    row_filtered: bool = field(init=False)

    def __post_init__(self) -> None:
        facts = _facts.get(self.index, IndexFacts.of)
        self.fields, self.denied, self.hiding = facts.fields, facts.denied, facts.hiding
        self.source_paths, self.allowed_fields = facts.source_paths, facts.allowed_fields
        self.row_filtered = bool(self.source.row_filters_for(self.index.name))

    @contextmanager
    def within_buckets(self, count: int) -> Iterator[None]:
        """Check sub-aggregations knowing each runs once in each of ``count`` more buckets."""
        outer = self.buckets
        self.buckets = outer * count
        try:
            yield
        finally:
            self.buckets = outer

    # --- refusals ----------------------------------------------------------------------

    def refuse(self, code: str, message: str, path: JsonPath, hint: str | None = None) -> NoReturn:
        """Raise the violation, naming where in the body it stands."""
        raise SandboxViolation(code, f"{message} at {format_path(path)}", hint=hint, source=self.source.source)

    def expect(self, value: Any, kinds: type | tuple[type, ...], path: JsonPath, what: str) -> Any:
        """``value`` when it is of ``kinds``; else an ``invalid_body`` naming what was expected."""
        if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in _as_tuple(kinds)):
            return value
        self.refuse("invalid_body", f"expected {what}, got {_describe(value)}", path, f"write {what} here")

    # --- fields ------------------------------------------------------------------------

    def field(self, name: Any, path: JsonPath, *, nested: bool = False) -> str:
        """Check one field name where the request uses it; record it as read.

        ``name.keyword`` stands for the multi-field of a declared text field ``name`` (the
        default dynamic mapping adds it); it holds the same data, so it is checked as ``name``.
        Patterns are refused: a pattern could reach a denied field, and the manifest is the
        list of what exists. ``nested`` asks for the path of a nested field (``nested`` query
        and aggregation), which reads nothing by itself.
        """
        self.expect(name, str, path, "a field name")
        if "*" in name or "?" in name:
            self.refuse("denied_field", f"field pattern {name!r}: name each field", path,
                        closest_hint(name.replace("*", "").replace("?", ""), self.allowed_fields, what="fields"))
        declared = self._declared(name)
        if declared is None:
            self.refuse("unknown_field", f"unknown field {name!r} in index {self.index.name!r}", path,
                        closest_hint(name, self.allowed_fields, what="fields"))
        if declared in self.denied:
            self.refuse("denied_field", f"field {name!r} is not readable (access: deny)", path,
                        closest_hint(name, self.allowed_fields, what="readable fields"))
        if nested:
            return self._nested_path(name, declared, path)
        if declared in self.hiding:
            inside = [p for p in self.allowed_fields if p.startswith(declared + ".")]
            self.refuse("denied_field", f"object {name!r} contains fields that are not readable", path,
                        f"name its readable fields instead: {', '.join(inside)}")
        self.columns.setdefault(declared, None)
        return name

    def _declared(self, name: str) -> str | None:
        """The declared field ``name`` stands for, or None."""
        if name in self.fields:
            return name
        base = name.removesuffix(".keyword")
        if base != name and base in self.fields and self.fields[base].type == "text":
            return base
        return None

    def _nested_path(self, name: str, declared: str, path: JsonPath) -> str:
        if self.fields[declared].type != "nested":
            nested = [p for p, f in self.fields.items() if f.type == "nested" and p not in self.denied]
            self.refuse("invalid_body", f"{name!r} is not a nested field", path,
                        f"nested fields: {', '.join(nested) or '(none)'}")
        return name

    # --- values ------------------------------------------------------------------------

    def reference(self, value: Any) -> str | None:
        """The reference text (``key`` or ``key.column``) when ``value`` is exactly ``"<…>"``;
        ``:name`` when it is exactly a slot parameter of a template plan."""
        if isinstance(value, str) and value.startswith(":") and value[1:] in self.slots:
            return value
        found = value_reference(value)
        return found.text if found is not None else None

    def reference_values(self, ref: str, path: JsonPath) -> list[Any]:
        """The values bound to ``<ref>``; a reference with no values is a plan mistake."""
        if ref.startswith(":"):  # a template's slot, recorded as the SQL sandbox names it
            self.used["slot_" + ref[1:]] = self.slots[ref[1:]]
            return [self.slots[ref[1:]]]
        if ref not in self.params:
            known = ", ".join(f"<{k}>" for k in self.params) or "(none)"
            raise PlanError(f"no values for reference <{ref}> at {format_path(path)}",
                            hint=f"references name earlier steps; available here: {known}")
        values = list(self.params[ref])
        self._plain_values(ref, values, path)
        self.used[ref] = values
        return values

    @staticmethod
    def _plain_values(ref: str, values: list[Any], path: JsonPath) -> None:
        """References carry data from an earlier step — possibly from documents anyone could
        write — into this body. An object or a list there would be read by the search server as
        clause options (``{"value": "*x", "case_insensitive": true}``, a ``script``), past
        every check the literal body went through; only JSON scalars may pass."""
        bad = [v for v in values if not isinstance(v, PLAIN_TYPES)]
        if bad:
            raise PlanError(
                f"reference <{ref}> at {format_path(path)} carries {_kind(bad[0])} value; "
                "only plain values can be passed on",
                hint=f"make step {ref.split('.')[0]!r} return a plain column (a string, number or "
                     "boolean), e.g. by naming a sub-field instead of an object",
            )

    def scalar(self, value: Any, path: JsonPath) -> Scalar:
        """A query value: a JSON scalar, or a reference that holds exactly one value."""
        ref = self.reference(value)
        if ref is None:
            self._no_embedded_reference(value, path)
            return self.expect(value, SCALAR_TYPES, path, "a string, number or boolean")
        values = self.reference_values(ref, path)
        if len(values) != 1:
            raise PlanError(
                f"<{ref}> at {format_path(path)} stands for one value, but its step returned {len(values)} rows",
                hint="use it where a list fits (terms, ids), or make the earlier step return one row",
            )
        return values[0]

    def values(self, value: Any, path: JsonPath) -> list[Any]:
        """A list of query values: a JSON list (whose references are spliced in as values) or
        one reference standing for its whole column."""
        if self.reference(value) is not None:
            return self.reference_values(self.reference(value), path)
        items = self.expect(value, list, path, "a list of values or a <reference>")
        out: list[Any] = []
        for i, item in enumerate(items):
            ref = self.reference(item)
            out += self.reference_values(ref, (*path, i)) if ref else [self.scalar(item, (*path, i))]
        return out

    def _no_embedded_reference(self, value: Any, path: JsonPath) -> None:
        """References are whole JSON values; text around one would be searched literally."""
        if isinstance(value, str) and REFERENCE.search(value):
            raise PlanError(
                f"reference inside the text {value!r} at {format_path(path)}",
                hint='a reference stands alone as the whole value, e.g. {"terms": {"author_id": "<top>"}}',
            )

    def check_enum(self, name: str, literal: Any, path: JsonPath) -> None:
        """A literal compared with an enum field must be one of its ``values`` — unless they are a
        ``draft`` field's, which profiling suggested and no person accepted."""
        declared = self._declared(name)
        legal = self.fields[declared].values if declared and not self.fields[declared].draft else None
        if not legal or self.reference(literal) is not None:
            return
        text = str(literal).lower() if isinstance(literal, bool) else str(literal)
        if text not in legal:
            meanings = listing((f"{k} ({v})" if v else k for k, v in legal.items()), near=text)
            self.refuse("enum_value", f"{literal!r} is not a value of {name!r}", path, f"legal values: {meanings}")


def _as_tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


_KINDS = {dict: "an object", list: "a list", tuple: "a list", str: "a string", bool: "a boolean",
          int: "a number", float: "a number", type(None): "null"}


def _kind(value: Any) -> str:
    """``an object``, ``a list``, ``a number``…: what a JSON value is, for error messages."""
    return _KINDS.get(type(value), f"a {type(value).__name__}")


def _describe(value: Any) -> str:
    """A short description of a JSON value for error messages (scalars with their value)."""
    kind = _kind(value)
    return f"{kind} {value!r}" if isinstance(value, SCALAR_TYPES) else kind
