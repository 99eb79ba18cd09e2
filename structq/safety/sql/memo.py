"""Checked queries remembered: the same query on the same manifest is checked once.

A plan's steps are checked on every run, and most runs repeat queries already checked: a
verified example, a cached plan, the second step of a plan whose text never changes while the
values it is given do. A full check parses, qualifies and regenerates the query (milliseconds
on a long one); on a multi-step plan over a fast database that was most of the run. So a check
that passed is remembered, and the same query checked again gets the same checked text with
the *current* values bound.

What makes two checks "the same", so that a remembered one can never let another query
through (the key):

- the exact query text (string equality, no normalisation), the source's dialect and the row
  cap (``max_rows``, which the outermost LIMIT is written from);
- the manifest *object* (its identity: manifests are frozen models, and loading, syncing or
  describing earlier results makes new ones, the way ``schema.derived`` caches too); the entry
  holds the manifest, so its identity cannot be reused by another one while remembered;
- the names of the row-filter variables, of the template slots and of the references the
  caller supplied (which of them exist decides what is bound, refused or missing);
- the *shape* of each reference's values (``references.ReferenceValues.shape``): whether
  there are none, whether there is exactly one where the query uses it as a scalar, and on
  SQLite how the list is cast and split — everything about the values that the rewritten text
  depends on. A different shape is checked again in full.

Values are never part of what is remembered: each parameter records where its value came
from (``Check.origins``: a variable, a slot, a reference's list, scalar or JSON part), and a
remembered check binds them again from the current call — the current principal's variables,
the current results. A check whose parameters do not all have exactly one origin, and any
check that failed, is not remembered (a refused query is checked again, and refused again).

At most ``SIZE`` checks are kept (least recently used go first). ``stats()`` counts full
checks and remembered ones, for tests that count checks instead of timing them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from structq.capabilities import Manifest

from ..query import SafeQuery
from .context import Check
from .rules.references import ReferenceValues

__all__ = ["SIZE", "Stats", "checked", "clear", "stats"]

#: Most checks remembered at once.
SIZE = 1024


@dataclass(frozen=True)
class Stats:
    """How many checks ran in full (``checks``) and how many were remembered (``hits``)."""

    checks: int
    hits: int


class _Remembered(NamedTuple):
    """One remembered check (a tuple: built on every full check, at a fraction of a frozen
    dataclass's cost)."""

    manifest: Manifest
    safe: SafeQuery
    #: (reference, used as a scalar, shape of its values) for every reference the query has.
    shapes: tuple[tuple[str, bool, tuple[Any, ...] | None], ...]
    #: (parameter name, where its value comes from) for every bound parameter.
    origins: tuple[tuple[str, tuple[Any, ...]], ...]


_entries: OrderedDict[tuple[Any, ...], _Remembered] = OrderedDict()
_lock = threading.Lock()
_counts = {"checks": 0, "hits": 0}


def stats() -> Stats:
    with _lock:
        return Stats(_counts["checks"], _counts["hits"])


def clear() -> None:
    """Forget every remembered check (the counts stay)."""
    with _lock:
        _entries.clear()


def checked(
    query: str,
    manifest: Manifest,
    max_rows: int,
    references: Mapping[str, Sequence[Any]],
    variables: Mapping[str, Any],
    slots: Mapping[str, Any],
    check: Callable[[], tuple[SafeQuery, Check]],
) -> SafeQuery:
    """The checked query: remembered when the same query was checked before (see the module
    docstring), else ``check()`` — the full check — whose result is remembered if it passes."""
    dialect = manifest.sql_dialect
    key = (query, id(manifest), dialect, max_rows, _names(variables), _names(slots), _names(references))
    with _lock:
        entry = _entries.get(key)
        if entry is None:
            _counts["checks"] += 1  # counted here: a miss takes the lock once before checking
        else:
            _entries.move_to_end(key)
    if entry is not None:
        if entry.manifest is manifest:
            found = _rebind(entry, ReferenceValues(dialect, references), variables, slots)
            if found is not None:
                with _lock:
                    _counts["hits"] += 1
                return found
        with _lock:
            _counts["checks"] += 1
    safe, state = check()
    entry = _remember(manifest, safe, state, dialect, references)
    if entry is not None:
        with _lock:
            _entries[key] = entry
            _entries.move_to_end(key)
            while len(_entries) > SIZE:
                _entries.popitem(last=False)
    return safe


_NO_NAMES: frozenset[str] = frozenset()


def _names(values: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(values) if values else _NO_NAMES


def _remember(manifest: Manifest, safe: SafeQuery, state: Check, dialect: str,
              references: Mapping[str, Sequence[Any]]) -> _Remembered | None:
    """What to remember of a passed check; None when a parameter's origin is not exactly one."""
    if not state.origins and not safe.params and not state.placeholders:
        return _Remembered(manifest, safe, (), ())  # nothing bound (most queries): nothing to record
    values = ReferenceValues(dialect, references)
    if set(state.origins) != set(safe.params) or any(len(found) != 1 for found in state.origins.values()):
        return None
    origins = tuple((name, next(iter(found))) for name, found in state.origins.items())
    scalars = {origin[1] for _, origin in origins if origin[0] == "scalar"}
    shapes = tuple((reference, reference in scalars, values.shape(reference, reference in scalars))
                   for reference in sorted(set(state.placeholders.values())))
    # Values are never kept: a remembered query's ``params`` are never read (``_rebind`` binds
    # the current call's), so a query that binds none is kept as it is, without a copy (2.4 µs,
    # ~0.1× the parse of a short query).
    kept = safe.with_params({}) if safe.params else safe
    return _Remembered(manifest, kept, shapes, origins)


def _rebind(entry: _Remembered, values: ReferenceValues, variables: Mapping[str, Any],
            slots: Mapping[str, Any]) -> SafeQuery | None:
    """The remembered query with this call's values; None when a reference's shape differs."""
    for reference, scalar, shape in entry.shapes:
        if shape is None or values.shape(reference, scalar) != shape:
            return None
    params: dict[str, Any] = {}
    for name, origin in entry.origins:
        kind = origin[0]
        if kind == "var":
            params[name] = variables[origin[1]]
        elif kind == "slot":
            params[name] = slots[origin[1]]
        else:
            params[name] = values.value(origin)
    return entry.safe.with_params(params)
