"""Each ``<key>`` / ``<key.column>`` reference is bound as a parameter, by context, never spliced.

Inside ``IN (<ref>)`` (the sole element) a reference is a list, written per dialect so that
any size up to the intermediate-row cap works in ONE statement, aggregates included:

- PostgreSQL: ``col = ANY(:ref)``, the list bound as an array (the executor types it as
  ``col``); a list of ``PG_SWITCHED_LIST`` values or more as ``CASE WHEN :ref_hashed THEN
  CASE (col = ANY(:ref)) WHEN TRUE THEN TRUE WHEN FALSE THEN FALSE END ELSE col = ANY(:ref)
  END``, whose boolean switch lets the executor choose a hashed search with no planning per
  value or the plain form (``_switch``): the same rows either way;
- SQLite: ``col IN (SELECT CAST(value AS …) FROM json_each(:ref))``, the list bound as JSON
  text, each element cast to the affinity its values came with (``_sqlite_element``), so the
  comparison is the one the equivalent subquery makes. One SQLite value may hold at most
  ``SQLITE_LIST_PART_BYTES`` here (the executor's value limit is 10 MB), so a longer JSON
  list — a million text keys — is bound in parts, ``SELECT … FROM json_each(:ref) UNION ALL
  SELECT … FROM json_each(:ref_2) …``, and a value too wide for any part (a document's text)
  is bound alone as itself, ``UNION ALL SELECT CAST(:ref_3 AS TEXT)``: lists of any length
  up to the intermediate-row cap and values of any width work, and every value is still
  bound, never spliced;
- MySQL and other dialects: ``col IN :ref`` with ``ref`` in ``SafeQuery.expanding``: SQLAlchemy
  expands it, or the MySQL executor sends the whole list as one parameter written by the
  connection's own escaping (``executors/sql/mysql/``; the drivers interpolate client-side,
  there is no placeholder cap); an empty list makes the condition ``FALSE`` (what ``IN`` over
  an empty subquery is, for NULL too).

``NOT IN`` wraps the same ``IN`` node and follows. An empty list therefore selects nothing
under ``IN`` and everything under ``NOT IN``, on every dialect. Anywhere else a reference is a
scalar and needs exactly one value (``PlanError`` otherwise). Values are always bound, never
spliced into the text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlglot import exp

from structq.errors import PlanError

from ..context import Check

__all__ = ["bind_references", "REFERENCE_PREFIX", "ReferenceValues"]

REFERENCE_PREFIX = "ref_"

#: Most UTF-8 bytes of JSON bound in one SQLite list parameter: under the SQLite executor's
#: value limit (``executors.sql.SQLITE_MAX_VALUE_BYTES``, 10 MB), which ``json_each`` input
#: counts against, with room for JSON's quoting and escapes.
SQLITE_LIST_PART_BYTES = 4_000_000

#: PostgreSQL: a list of at least this many values is written with a switch (``_switch``).
PG_SWITCHED_LIST = 1000


def _values(check: Check, reference: str) -> Sequence[Any]:
    if reference not in check.references:
        known = ", ".join(f"<{k}>" for k in check.references) or "none"
        raise PlanError(
            f"reference <{reference}> has no resolved values",
            hint=f"refer only to earlier steps' output keys; resolved references: {known}",
        )
    return check.references[reference]


def _name(check: Check, reference: str, value: Any) -> str:
    base = REFERENCE_PREFIX + reference.replace(".", "__")
    name, n = base, 1
    while name in check.params and check.params[name] is not value:
        n += 1
        name = base + "_" + str(n)
    return name


def _list_form(check: Check, node: exp.In, placeholder: exp.Placeholder, values: Sequence[Any]) -> exp.EQ | None:
    """Write ``node`` in the dialect's list form; on PostgreSQL, return the ``= ANY`` of a
    list long enough to be switched (``_switch``, once every placeholder is bound)."""
    dialect = check.sql_dialect
    reference = placeholder.name
    switched = None
    if dialect == "postgres":
        value: Any = list(values)
        name = _name(check, reference, value)
        test = exp.EQ(this=node.this, expression=exp.Any(this=exp.Paren(this=placeholder)))
        node.replace(test)
        switched = test if len(value) >= PG_SWITCHED_LIST else None
    elif dialect == "sqlite":
        node.set("expressions", [])
        node.set("query", exp.Subquery(this=_sqlite_list(check, reference, values)))
        return None
    elif not values:
        # ``x IN (<empty>)`` is false for every x, NULL included (as over an empty subquery),
        # and NOT IN true; an expanding bind of nothing would write ``IN ()``, which MySQL
        # and MariaDB refuse. No value is bound: the condition is the constant.
        node.replace(exp.false())
        return None
    else:
        value = list(values)
        name = _name(check, reference, value)
        node.set("expressions", [])
        node.set("field", placeholder)
        check.expanding.add(name)
    placeholder.set("this", name)
    check.bind(name, value, ("list", reference))
    return switched


def _switch(check: Check, test: exp.EQ, reference: str) -> None:
    """``x = ANY(:list)`` as ``CASE WHEN :switch THEN <hashed> ELSE x = ANY(:list) END``,
    where ``<hashed>`` is ``CASE (x = ANY(:list)) WHEN TRUE THEN TRUE WHEN FALSE THEN FALSE END``.

    Both branches are ``x = ANY(:list)``, NULL for NULL, so the switch never changes the
    result (NOT IN negates either). What it changes is PostgreSQL's plan: with the switch
    bound, the planner keeps one branch before it plans. Plain, it estimates the selectivity
    of every element (tens of milliseconds for 100k values) and may use an index; inside the
    ``CASE`` it sees no ``= ANY`` clause, estimates nothing per element and cannot use an index,
    and the executor still hashes the array. The sandbox binds False (plain); the PostgreSQL
    executor sends True when the list will be hashed and the tables are small enough for a
    scan (``executors/sql/postgresql/``).
    """
    name = test.expression.this.this.name  # the list's parameter
    switch = name + "_hashed"
    while switch in check.params:
        switch += "_"
    hashed_test = test.copy()
    hashed = exp.Case(this=exp.Paren(this=hashed_test), ifs=[exp.If(this=exp.true(), true=exp.true()),
                                                             exp.If(this=exp.false(), true=exp.false())])
    flag = exp.Placeholder(this=switch)
    choice = exp.Case(ifs=[exp.If(this=flag, true=hashed)])
    test.replace(choice)
    choice.set("default", test)
    # The copy's placeholders (the list's, and any in x) are written out like the others.
    check.bind_nodes.extend([flag, *hashed_test.find_all(exp.Placeholder)])
    check.bind(switch, False, ("switch", reference))
    check.switches[switch] = name


def _json_parts(values: Sequence[Any]) -> tuple[list[str], list[Any]]:
    """``values`` as JSON lists of at most ``SQLITE_LIST_PART_BYTES`` each, and the values too
    wide to go in any (bound one by one). One list when it fits: the common case, encoded once.

    A longer list is cut into runs of values by count, each encoded in one ``json.dumps``
    (in C), and a run still too long is halved until it fits: a million short texts take a
    few encodings of a few hundred thousand values each, not a million of one.
    """
    whole = _json(values)
    if _fits(whole):
        return [whole], []
    parts: list[str] = []
    alone: list[Any] = []
    runs = -(-_utf8_bytes(whole) // SQLITE_LIST_PART_BYTES) + 1
    step = -(-len(values) // runs)
    pending = [values[i:i + step] for i in range(0, len(values), step)]
    pending.reverse()  # popped from the end: in the list's order
    while pending:
        run = pending.pop()
        encoded = _json(run)
        if _fits(encoded):
            parts.append(encoded)
        elif len(run) == 1:
            alone.append(run[0])
        else:
            half = len(run) // 2
            pending += [run[half:], run[:half]]
    return parts or ["[]"], alone


def _json(values: Sequence[Any]) -> str:
    return json.dumps(list(values), ensure_ascii=False, default=str)


def _utf8_bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _fits(encoded: str) -> bool:
    """Whether one JSON list text goes in one SQLite parameter."""
    return len(encoded) * 4 <= SQLITE_LIST_PART_BYTES or _utf8_bytes(encoded) <= SQLITE_LIST_PART_BYTES


def _sqlite_list(check: Check, reference: str, values: Sequence[Any]) -> exp.Query:
    """The subquery that yields ``values`` on SQLite: one ``json_each`` per JSON part, one
    bound value per value too wide for a part, joined by ``UNION ALL``."""
    element = _sqlite_element(values)
    parts, alone = _json_parts(values)
    selects: list[exp.Query] = []
    for i, part in enumerate(parts):
        bound = exp.Placeholder(this=_name(check, reference if i == 0 else f"{reference}.part{i + 1}", part))
        check.bind(bound.name, part, ("json", reference, i))
        table = exp.Table(this=exp.Anonymous(this="json_each", expressions=[bound]))
        selects.append(exp.select(element.copy()).from_(table, copy=False))
    for i, value in enumerate(alone):
        bound = exp.Placeholder(this=_name(check, f"{reference}.wide{i + 1}", value))
        check.bind(bound.name, value, ("wide", reference, i))
        single = exp.Cast(this=bound, to=element.args["to"].copy()) if isinstance(element, exp.Cast) else bound
        selects.append(exp.select(single))
    query = selects[0]
    for more in selects[1:]:
        query = exp.union(query, more, distinct=False, copy=False)
    return query


def _sqlite_element(values: Sequence[Any]) -> exp.Expr:
    """The list element as SQLite should compare it: with the affinity of the column the
    values came from, as the equivalent ``IN (SELECT column …)`` would.

    ``json_each`` values have no affinity, and SQLite compares ``text_col IN (SELECT value …)``
    without converting either side, so ``'3' IN ([3])`` is false where the subquery over an
    INTEGER key column finds the row. Numbers come from a numeric column and strings from a
    text one, so ``CAST(value AS NUMERIC)`` / ``CAST(value AS TEXT)`` give the element that
    column's affinity (the cast leaves such values unchanged). A list mixing numbers and text
    can only come from a column without affinity, and is compared as such (no cast).
    """
    target = _sqlite_target(values)
    if target is None:
        return exp.column("value")
    return exp.Cast(this=exp.column("value"), to=exp.DataType.build(target))


def _sqlite_target(values: Sequence[Any]) -> str | None:
    """The type a SQLite list element is cast to (``_sqlite_element``); None: no cast."""
    kinds = {type(v) for v in values if v is not None}
    if kinds and kinds <= {int, float, bool}:
        return "NUMERIC"
    if kinds == {str}:
        return "TEXT"
    return None


def bind_references(check: Check) -> None:
    """Turn each reference placeholder into a bound list or scalar parameter."""
    switched: list[tuple[exp.EQ, str]] = []
    for placeholder in check.bind_nodes:
        if placeholder.name not in check.placeholders:
            continue  # a row-filter variable, bound already
        reference = check.placeholders[placeholder.name]
        values = _values(check, reference)
        placeholder.set("this", reference)
        parent = placeholder.parent
        if isinstance(parent, exp.In) and parent.expressions == [placeholder] and not parent.args.get("query"):
            test = _list_form(check, parent, placeholder, values)
            if test is not None:
                switched.append((test, reference))
            continue
        if len(values) != 1:
            top = reference.split(".")[0]
            raise PlanError(
                f"scalar reference <{top}> needs exactly one row, got {len(values)}",
                hint=f"use IN (<{reference}>) to compare with every value, or make step {top!r} return one row",
            )
        name = _name(check, reference, values[0])
        placeholder.set("this", name)
        check.bind(name, values[0], ("scalar", reference))
    for test, reference in switched:
        _switch(check, test, reference)


class ReferenceValues:
    """One call's reference values, read the way ``bind_references`` binds them — for a
    remembered check (``memo.py``) to bind new values into the same checked text.

    ``shape(reference, scalar)`` is everything about the values that the *text*
    ``bind_references`` writes depends on: whether there are none (MySQL's ``FALSE``), and
    for a reference also used as a scalar whether there is exactly one; on PostgreSQL, whether
    the list is switched (``PG_SWITCHED_LIST``); on SQLite, the element's cast and how many
    JSON parts and lone wide values the list takes. Two calls whose references have equal
    shapes get the same text; only the values bound differ (a switch is bound False again),
    and ``value(origin)`` gives each parameter's, as the first call's
    ``Check.origins`` recorded where it came from. Derived forms (the JSON parts) are
    computed once per call.
    """

    def __init__(self, dialect: str, references: Mapping[str, Sequence[Any]]) -> None:
        self.dialect = dialect
        self.references = references
        self._parts: dict[str, tuple[list[str], list[Any]]] = {}

    def shape(self, reference: str, scalar: bool) -> tuple[Any, ...] | None:
        """The shape of ``reference``'s values (``scalar``: the query also uses it as a
        scalar); None when it has none (not resolved)."""
        values = self.references.get(reference)
        if values is None:
            return None
        size = min(len(values), 2 if scalar else 1)
        if self.dialect == "postgres":
            return (size, len(values) >= PG_SWITCHED_LIST)
        if self.dialect != "sqlite":
            return (size,)
        parts, alone = self._json(reference)
        return (size, _sqlite_target(values), len(parts), len(alone))

    def value(self, origin: tuple[Any, ...]) -> Any:
        """The value a parameter of ``origin`` (``Check.origins``) binds for these values."""
        form, reference = origin[0], origin[1]
        values = self.references[reference]
        if form == "list":
            return list(values)
        if form == "scalar":
            return values[0]
        if form == "switch":
            return False
        parts, alone = self._json(reference)
        return parts[origin[2]] if form == "json" else alone[origin[2]]

    def _json(self, reference: str) -> tuple[list[str], list[Any]]:
        found = self._parts.get(reference)
        if found is None:
            found = self._parts[reference] = _json_parts(self.references[reference])
        return found
