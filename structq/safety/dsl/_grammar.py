"""The vocabulary the allowlists are written in: a *check* takes a JSON value and its path and
returns the value to send (a new object, never the caller's), or raises.

The tables in ``_queries``, ``_hits``, ``_aggs`` and ``_request`` are built from these few
pieces, so a rule reads as data (``"field": field``, ``"size": agg_size``) and every key of the
body is visited by exactly one check: anything the tables do not name is refused.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field as dataclass_field
from typing import Any

from structq.errors import PlanError

from ._context import REASONS, Context, JsonPath, closest_hint, format_path

__all__ = [
    "Check", "Shape", "each", "one_or_many", "data", "count", "agg_size", "field", "nested_path",
    "boosted_fields", "scalar", "values", "pick_one", "refuse_name",
]

Check = Callable[[Context, Any, JsonPath], Any]


def refuse_name(ctx: Context, code: str, name: str, allowed: Mapping[str, Any], path: JsonPath, what: str) -> None:
    """Refuse a key, clause or aggregation the allowlist does not name, saying why when the
    name is a known danger, and listing what is allowed."""
    listing = closest_hint(name, allowed, what=f"allowed {what}s")
    reason = REASONS.get(name)
    ctx.refuse(code, f"{what} {name!r} is not allowed" + (f": {reason}" if reason else ""), path, listing)


@dataclass(frozen=True)
class Shape:
    """A JSON object whose keys are an allowlist, each with the check of its value.

    ``required`` maps a key that must be present to the hint given when it is missing.
    """

    keys: Mapping[str, Check]
    required: Mapping[str, str] = dataclass_field(default_factory=dict)
    what: str = "key"

    def __call__(self, ctx: Context, value: Any, path: JsonPath) -> dict[str, Any]:
        obj = ctx.expect(value, dict, path, "an object")
        for key, hint in self.required.items():
            if key not in obj:
                ctx.refuse("missing_key", f"{key!r} is required", path, hint)
        out: dict[str, Any] = {}
        for key, item in obj.items():
            check = self.keys.get(key)
            if check is None:
                refuse_name(ctx, "denied_key", str(key), self.keys, (*path, key), self.what)
            out[key] = check(ctx, item, (*path, key))
        return out

    def extend(self, keys: Mapping[str, Check], **changes: Any) -> "Shape":
        """The same shape with more keys (options shared by a family of clauses)."""
        return Shape({**self.keys, **keys}, **{"required": self.required, "what": self.what, **changes})


def each(check: Check) -> Check:
    """A list whose every item passes ``check``."""

    def checked(ctx: Context, value: Any, path: JsonPath) -> list[Any]:
        items = ctx.expect(value, list, path, "a list")
        return [check(ctx, item, (*path, i)) for i, item in enumerate(items)]

    return checked


def one_or_many(check: Check) -> Check:
    """One item or a list of items (``bool.must``, ``sort``, ``_source``)."""
    many = each(check)

    def checked(ctx: Context, value: Any, path: JsonPath) -> Any:
        return many(ctx, value, path) if isinstance(value, list) else check(ctx, value, path)

    return checked


def data(ctx: Context, value: Any, path: JsonPath) -> Any:
    """A plain option (an order, a format, bucket ranges): passed on as a copy. The key that
    holds it is allowlisted, so the search server reads it as data; a reference here would not be
    substituted, so it is refused rather than sent as text."""
    _no_reference(ctx, value, path)
    return copy.deepcopy(value)


def _no_reference(ctx: Context, value: Any, path: JsonPath) -> None:
    """Options are data; text shaped like ``<b>`` (a highlight tag) stays text unless it names
    a step whose values were given, which means the plan meant a reference."""
    if ctx.reference(value) in ctx.params:
        raise PlanError(f"reference {value!r} at {format_path(path)} stands where no query value goes",
                        hint="references are allowed as values of term, terms, match, range, ids and the like")
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in children:
        _no_reference(ctx, item, (*path, key))


def count(ctx: Context, value: Any, path: JsonPath) -> int:
    """A non-negative integer (``from``, ``size``), or a template's integer slot (``":n"``)."""
    slot = ctx.reference(value) if isinstance(value, str) and value.startswith(":") else None
    if slot is not None:
        value = ctx.reference_values(slot, path)[0]
    number = ctx.expect(value, int, path, "a non-negative integer")
    if number < 0:
        ctx.refuse("invalid_body", f"expected a non-negative integer, got {number}", path, "write 0 or more")
    return number


def agg_size(ctx: Context, value: Any, path: JsonPath) -> int:
    """Buckets or hits an aggregation returns: at most the row limit, since no truncation
    marker would tell that more were cut off."""
    number = count(ctx, value, path)
    if number > ctx.limit:
        ctx.refuse("size_limit", f"size {number} is above the limit of {ctx.limit}", path,
                   f"ask for at most {ctx.limit} (max_rows {ctx.max_rows} + 1), ordered so the ones that matter come first")
    return number


def field(ctx: Context, value: Any, path: JsonPath) -> str:
    """A declared, readable field name."""
    return ctx.field(value, path)


def nested_path(ctx: Context, value: Any, path: JsonPath) -> str:
    """The path of a declared ``nested`` field."""
    return ctx.field(value, path, nested=True)


_BOOST = re.compile(r"^(?P<name>.*?)(?P<boost>\^\d+(?:\.\d+)?)?$")


def boosted_fields(ctx: Context, value: Any, path: JsonPath) -> list[str]:
    """``["title^2", "content"]``: each name checked, its ``^boost`` kept."""
    names = ctx.expect(value, list, path, 'a list of field names such as ["title^2", "content"]')
    if not names:
        ctx.refuse("missing_key", "the list of fields is empty", path, "name at least one field")
    out = []
    for i, entry in enumerate(names):
        ctx.expect(entry, str, (*path, i), "a field name")
        match = _BOOST.match(entry)
        assert match is not None  # the pattern matches every string
        ctx.field(match["name"], (*path, i))
        out.append(entry)
    return out


def scalar(ctx: Context, value: Any, path: JsonPath) -> Any:
    """One query value (a reference standing for exactly one value is substituted)."""
    return ctx.scalar(value, path)


def values(ctx: Context, value: Any, path: JsonPath) -> list[Any]:
    """A list of query values (a reference stands for its whole column)."""
    return ctx.values(value, path)


def pick_one(ctx: Context, obj: Any, table: Mapping[str, Any], path: JsonPath, *,
             code: str, what: str, extra: frozenset[str] = frozenset()) -> str:
    """The one key of ``obj`` that names an entry of ``table`` (a clause, an aggregation);
    keys in ``extra`` may stand beside it. Anything else is refused with ``code``."""
    ctx.expect(obj, dict, path, f"an object holding one {what}")
    names = [k for k in obj if k not in extra]
    for name in names:
        if name not in table:
            refuse_name(ctx, code, str(name), table, (*path, name), what)
    if len(names) != 1:
        found = ", ".join(map(repr, names)) or "none"
        ctx.refuse("invalid_body", f"expected exactly one {what}, found {found}", path,
                   "wrap several in a bool (queries) or give each its own name (aggregations)")
    return names[0]
