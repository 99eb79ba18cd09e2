"""Query clauses: the allowlist, and the check of each clause's body.

Allowed are the clauses a question over declared fields needs: full-text (``match`` family,
``multi_match`` and ``simple_query_string`` with explicit fields), term-level (``term``,
``terms``, ``range``, ``exists``, ``prefix``, ``wildcard`` without a leading wildcard,
``fuzzy``, ``ids``) and compounds (``bool``, ``constant_score``, ``dis_max``, ``boosting``,
``nested``, ``function_score`` without scripts). Everything else is refused — notably
``query_string`` (its syntax names arbitrary fields), ``regexp`` (cost), ``more_like_this``,
``percolate``, joins and ``wrapper`` (they read other documents or hide a query); see
``REASONS`` in ``_context``. On a row-filtered index the expanding ones (``fuzzy``,
``fuzziness``, phrase prefixes) and ``min_score`` are refused too: see ``_tenant``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ._context import Context, JsonPath
from ._grammar import Check, Shape, boosted_fields, data, each, field, nested_path, one_or_many, pick_one, scalar, values
from ._tenant import fuzziness, min_score, multi_match_type, simple_query_string_flags, unless_row_filtered

__all__ = ["query", "QUERY_CLAUSES", "MAX_TERMS"]

#: Elasticsearch refuses a ``terms`` clause with more values (``index.max_terms_count``).
MAX_TERMS = 65_536

_META: Mapping[str, Check] = {"boost": data, "_name": data}


def query(ctx: Context, value: Any, path: JsonPath) -> dict[str, Any]:
    """One query clause, checked and rewritten (a ``terms`` beyond ``MAX_TERMS`` is split)."""
    name = pick_one(ctx, value, QUERY_CLAUSES, path, code="denied_clause", what="query clause")
    checked = {name: QUERY_CLAUSES[name](ctx, value[name], (*path, name))}
    return split_large_terms(checked)


def split_large_terms(clause: dict[str, Any]) -> dict[str, Any]:
    """``terms`` with more than ``MAX_TERMS`` values → one ``bool.should`` of ``terms`` chunks
    with ``minimum_should_match: 1``: the same documents, in one request, so aggregations over
    the hits stay right (several requests could not be merged for them)."""
    body = clause.get("terms")
    if body is None:
        return clause
    meta = {k: v for k, v in body.items() if k in _META}
    ((name, values),) = [(k, v) for k, v in body.items() if k not in _META]
    if len(values) <= MAX_TERMS:
        return clause
    chunks = [{"terms": {name: values[i:i + MAX_TERMS]}} for i in range(0, len(values), MAX_TERMS)]
    return {"bool": {"should": chunks, "minimum_should_match": 1, **meta}}


def _options(*names: str, **checks: Check) -> Shape:
    """The long form of a clause: plain options named, value options with their checks
    (``fuzziness`` always with its own: row-filtered indices refuse term expansion)."""
    plain = {n: fuzziness if n == "fuzziness" else data for n in names}
    return Shape({**plain, **_META, **checks}, what="option")


def _terms_values(ctx: Context, value: Any, path: JsonPath) -> list[Any]:
    """A list or a ``<reference>``; the lookup form (``{"index", "id", "path"}``) is refused
    because it reads a document of any index, outside the manifest and the row filters."""
    if isinstance(value, dict):
        ctx.refuse("terms_lookup", "terms lookup reads another document", path,
                   'give the values: {"terms": {"field": ["a", "b"]}} or a reference {"terms": {"field": "<step>"}}')
    if isinstance(value, str) and ctx.reference(value) is None:
        ctx.refuse("invalid_body", "terms takes a list of values", path,
                   'use {"term": {"field": "value"}} for one value, or a list')
    return ctx.values(value, path)


def _pattern(ctx: Context, value: Any, path: JsonPath) -> Any:
    """A wildcard pattern that does not start with ``*`` or ``?``: a leading wildcard makes
    the search server scan every term of the field."""
    pattern = ctx.scalar(value, path)
    if isinstance(pattern, str) and pattern[:1] in ("*", "?"):
        ctx.refuse("leading_wildcard", f"wildcard pattern {pattern!r} starts with a wildcard", path,
                   "start with literal characters (abc*), or use match for words anywhere in a text field")
    return pattern


@dataclass(frozen=True)
class FieldClause:
    """``{"<field>": <value or options>}``: one field and what to compare it with.

    ``main`` is the key the shorthand form stands for (``{"term": {"f": "x"}}`` means
    ``{"term": {"f": {"value": "x"}}}``); None means only the long form exists (``range``).
    ``options`` None means the value has no long form (``terms``). ``meta`` are keys allowed
    beside the field. ``enum`` applies the field's ``values`` to literals.
    """

    options: Shape | None
    main: str | None = None
    value: Check = scalar
    enum: bool = False
    meta: Mapping[str, Check] | None = None

    def __call__(self, ctx: Context, body: Any, path: JsonPath) -> dict[str, Any]:
        obj = ctx.expect(body, dict, path, "an object keyed by one field")
        meta = self.meta or {}
        names = [k for k in obj if k not in meta]
        if len(names) != 1:
            ctx.refuse("invalid_body", f"expected exactly one field, found {len(names)}", path,
                       "one field per clause; combine clauses with bool")
        name = names[0]
        ctx.field(name, (*path, name))
        out = {k: check(ctx, obj[k], (*path, k)) for k, check in meta.items() if k in obj}
        out[name] = self._value(ctx, obj[name], (*path, name))
        if self.enum:
            self._check_enum(ctx, name, obj[name], (*path, name))
        return out

    def _value(self, ctx: Context, given: Any, path: JsonPath) -> Any:
        if self.options is None:
            return self.value(ctx, given, path)
        if isinstance(given, dict):
            return self._long_form(ctx, given, path)
        if self.main is None:
            ctx.refuse("invalid_body", "expected an object of bounds and options", path,
                       'e.g. {"range": {"week_start_date": {"gte": "2024-03-01", "lt": "2024-04-01"}}}')
        return self.value(ctx, given, path)

    @cached_property
    def _long_form(self) -> Shape:
        """The options, plus the main key with the value's check (required when there is one)."""
        assert self.options is not None
        if self.main is None:
            return self.options
        return self.options.extend({self.main: self.value}, required={self.main: f"give the {self.main}"})

    def _check_enum(self, ctx: Context, name: str, given: Any, path: JsonPath) -> None:
        if isinstance(given, dict) and self.main:
            given, path = given.get(self.main), (*path, self.main)
        literals = given if isinstance(given, list) else [given]
        for i, literal in enumerate(literals):
            ctx.check_enum(name, literal, (*path, i) if isinstance(given, list) else path)


_CLAUSES = one_or_many(query)
_FIELD_VALUE_FACTOR = Shape({"field": field, "factor": data, "modifier": data, "missing": data},
                            required={"field": "name a numeric field"}, what="option")
_SCORE_FUNCTION = Shape(
    {"filter": query, "weight": data, "field_value_factor": _FIELD_VALUE_FACTOR,
     "random_score": Shape({"seed": data, "field": field}, what="option")},
    what="score function key",
)
_TEXT_MATCH = ("operator", "minimum_should_match", "analyzer", "fuzziness", "prefix_length",
               "max_expansions", "fuzzy_transpositions", "lenient", "zero_terms_query",
               "auto_generate_synonyms_phrase_query")
_NEED_FIELDS = ("name the fields to search, e.g. [\"title^2\", \"content\"]: without them the search server "
                "searches every field, unreadable ones included")

QUERY_CLAUSES: Mapping[str, Check] = {
    # compound
    "bool": _options("minimum_should_match", must=_CLAUSES, should=_CLAUSES, filter=_CLAUSES, must_not=_CLAUSES),
    "constant_score": Shape({"filter": query, **_META}, required={"filter": "give the filter clause"}),
    "dis_max": Shape({"queries": each(query), "tie_breaker": data, **_META},
                     required={"queries": "give a list of clauses"}),
    "boosting": Shape({"positive": query, "negative": query, "negative_boost": data, "boost": data},
                      required={"positive": "give the positive clause", "negative": "give the negative clause",
                                "negative_boost": "give negative_boost, e.g. 0.5"}),
    "nested": Shape({"path": nested_path, "query": query, "score_mode": data, "ignore_unmapped": data, **_META},
                    required={"path": "name the nested field", "query": "give the query on its sub-fields"}),
    "function_score": _options("boost_mode", "score_mode", "max_boost", "weight", query=query,
                               min_score=min_score, functions=each(_SCORE_FUNCTION),
                               field_value_factor=_FIELD_VALUE_FACTOR),
    # whole-index
    "match_all": Shape(dict(_META)),
    "match_none": Shape({"_name": data}),
    # full text
    "match": FieldClause(_options(*_TEXT_MATCH), main="query", enum=True),
    "match_phrase": FieldClause(_options("slop", "analyzer", "zero_terms_query"), main="query", enum=True),
    "match_phrase_prefix": unless_row_filtered(
        FieldClause(_options("slop", "max_expansions", "analyzer", "zero_terms_query"), main="query"),
        "match_phrase_prefix", "use match_phrase for the whole words and a prefix query for the last one "
        "in a bool, or match_bool_prefix"),
    "match_bool_prefix": FieldClause(_options(*_TEXT_MATCH), main="query"),
    "multi_match": _options("tie_breaker", "slop", *_TEXT_MATCH, type=multi_match_type, query=scalar,
                            fields=boosted_fields)
    .extend({}, required={"query": "give the text to search for", "fields": _NEED_FIELDS}),
    "simple_query_string": simple_query_string_flags(_options(
        "default_operator", "analyzer", "flags", "fuzzy_max_expansions", "fuzzy_prefix_length",
        "fuzzy_transpositions", "lenient", "minimum_should_match", "analyze_wildcard",
        "auto_generate_synonyms_phrase_query", query=scalar, fields=boosted_fields,
    ).extend({}, required={"query": "give the text to search for", "fields": _NEED_FIELDS})),
    # term level
    "term": FieldClause(_options("case_insensitive"), main="value", enum=True),
    "terms": FieldClause(None, value=_terms_values, enum=True, meta=_META),
    "range": FieldClause(_options("format", "time_zone", "relation", gt=scalar, gte=scalar, lt=scalar, lte=scalar)),
    "exists": Shape({"field": field, **_META}, required={"field": "name the field"}),
    "prefix": FieldClause(_options("case_insensitive"), main="value"),
    "wildcard": FieldClause(_options("case_insensitive"), main="value", value=_pattern),
    "fuzzy": unless_row_filtered(
        FieldClause(_options("fuzziness", "max_expansions", "prefix_length", "transpositions"), main="value"),
        "the fuzzy query", "search exact words with match or term, or word beginnings with prefix"),
    "ids": Shape({"values": values, **_META}, required={"values": "give the ids"}),
}
