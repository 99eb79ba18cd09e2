"""Part of ``resolve.py``: one select's columns bound to its sources, and its stars expanded.

``plan_columns`` records, for each column of a select, the source it reads (``Resolution.
columns``): a qualified column must name a source of the select (or of an enclosing one, for
a correlated subquery) that has the column; an unqualified one must match exactly one source.
Unqualified names that stand for something else are planned as ``qualify_columns`` writes
them: a USING column (``using.py``), a HAVING or GROUP BY name of a select expression
(``select_refs.py``). ``expanded`` replaces ``*`` and ``t.*`` by the columns they stand for.
Anything else raises ``Unsupported``, and the tree is left as parsed.
"""

from __future__ import annotations

from typing import Protocol

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from .resolution import Resolution
from .select_refs import SelectRefs, Unsupported
from .sources import Sources
from .using import using_reference

__all__ = ["Enclosing", "expanded", "plan_columns", "star_columns"]


class Enclosing(Protocol):
    """Where a correlated column's source is looked for (``resolve._Query``)."""

    def outer_source(self, where: Scope | exp.Select, alias: str) -> Sources | None:
        """The sources of the nearest select around ``where`` that defines ``alias``."""


def plan_columns(
    select: exp.Select,
    columns: list[exp.Column],
    sources: Sources,
    plan: Resolution,
    query: Enclosing,
    where: Scope | exp.Select,
    refs: SelectRefs | None,
    using: dict[str, list[str]] | None,
) -> dict[int, exp.Expr]:
    """Plan each column's source; the replacements of unqualified USING columns, by ``id()``.
    ``where``: the select's scope, or the select of a flat query, for ``query.outer_source``;
    ``refs`` is None for a select without HAVING, GROUP BY or ORDER BY: nothing there refers
    to its list."""
    # Looked up once: the loop runs per column, and most columns take its first few lines.
    resolved, own = plan.columns, sources.by_alias
    having = refs.having if refs is not None else None
    copied: set[int] | None = None  # HAVING columns copied (built for the first)
    replaced: dict[int, exp.Expr] = {}
    for column in columns:
        key = id(column)
        if key in resolved:
            # A subquery's column, listed again here as possibly correlated: the inner scope
            # (resolved first) already bound it, and an unresolved one stopped the plan there.
            continue
        this = column.this
        if not isinstance(this, exp.Identifier):
            if isinstance(this, exp.Star):
                # ``t.*``: no column of its own (``expanded``), as ``Scope.columns`` leaves it
                # out; a flat select's list has it, skipped here rather than copied out.
                continue
            raise Unsupported("column with more than two parts")
        args = column.args
        if args.get("db") or args.get("catalog"):
            raise Unsupported("column with more than two parts")
        alias = column.table
        name = column.name
        if alias:
            entry = own.get(alias)
            if entry is None:
                found = query.outer_source(where, alias)
                if found is None:
                    raise Unsupported("qualifier without a source")
                entry = found.by_alias[alias]
            if name.lower() not in entry[1]:
                raise Unsupported("unknown column")
            resolved[key] = (column, None, entry[0])
            continue
        if using and name in using:
            if having and key in having:
                raise Unsupported("a USING column in HAVING")
            if key not in replaced:  # a flat select may list a column twice (``having_columns``)
                replaced[key] = using_reference(column, using[name], sources, plan)
            continue
        lowered = name.lower()
        owner, owners = "", 0  # the first source that has the name, and how many have it
        for candidate, entry in own.items():
            if lowered in entry[1]:
                if not owners:
                    owner = candidate
                owners += 1
        if having and (alias_of := refs.having_alias(column, owners > 0)) is not None:  # type: ignore[union-attr]
            # As ``_expand_alias_refs`` writes it; once, though a flat select lists its HAVING
            # columns twice (its own, and ``having_columns``).
            if copied is None:
                copied = set()
            if key not in copied:
                copied.add(key)
                plan.copies.append((column, alias_of.this, True))
            continue
        if not owners:
            # No source has the name: a GROUP BY term naming a select expression, or unknown.
            if refs is None:
                raise Unsupported("unknown or ambiguous column")  # no GROUP BY (``alias_reference``)
            plan.copies.append((column, refs.alias_reference(column).this, True))
            continue
        if owners != 1:
            raise Unsupported("ambiguous column")
        resolved[key] = (column, sources.qualifier(owner), own[owner][0])
    if refs is not None:
        refs.check_order()
    return replaced


def expanded(select: exp.Select, sources: Sources, plan: Resolution) -> list[exp.Expr]:
    """The projections with ``*`` and ``t.*`` replaced by the columns they stand for."""
    if not select.is_star:  # no projection is ``*`` or ``t.*``: the list as written
        return list(select.expressions)
    out: list[exp.Expr] = []
    for projection in select.expressions:
        if isinstance(projection, exp.Star):
            if any(projection.args.values()):
                raise Unsupported("star modifiers")
            aliases = list(sources.by_alias)
        elif isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
            if any(projection.this.args.values()) or projection.table not in sources.by_alias:
                raise Unsupported("t.* of an unknown source")
            aliases = [projection.table]
        else:
            out.append(projection)
            continue
        if not aliases:
            raise Unsupported("star without sources")
        for alias in aliases:
            out += star_columns(alias, *sources.by_alias[alias], plan)
    return out


def star_columns(alias: str, source: object, names: dict[str, str], plan: Resolution) -> list[exp.Alias]:
    """The columns ``alias.*`` stands for, ``alias.name AS name`` for each of the source's
    ``names``, each planned as read from ``source``."""
    # Lower case, as every name after normalisation; ``check_columns`` then writes each column
    # in the manifest's spelling, and the output keeps this name.
    qualifier = exp.to_identifier(alias)
    out = []
    for name in names:
        # ``exp.alias_(exp.column(name, table=alias), name)``, built directly: the same nodes
        # (without ``db`` and ``catalog`` set to None, which reads alike and compares equal),
        # at about half the cost, for each column of each source.
        identifier = exp.to_identifier(name)
        column = exp.Column(this=identifier, table=exp.Identifier(**qualifier.args))
        plan.columns[id(column)] = (column, None, source)
        out.append(exp.Alias(this=column, alias=exp.Identifier(**identifier.args)))
    return out
