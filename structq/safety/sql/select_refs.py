"""Part of ``resolve.py``: the other clauses' references to a select's own list.

A select's GROUP BY, HAVING and ORDER BY may name what its select list computes — by output
name (``GROUP BY month`` for ``strftime(…) AS month``) or by position (``GROUP BY 1``) — and
``qualify_columns`` rewrites each such reference in its own way. The resolver writes the same
tree, so that every later pass (and the SQL that runs) is the same whichever path resolved the
query; each rule below is what ``qualify_columns`` does on the SQLite, PostgreSQL and MySQL
dialects (none of which expands aliases early), for the shapes taken here. Any other shape
raises ``Unsupported`` and takes the full path:

- a name no source of the scope has, that names one aliased select expression, as a whole
  GROUP BY term: the term becomes a copy of that expression (with its columns qualified). A
  name some source has is that source's column, in every clause but HAVING and ORDER BY;
- ``GROUP BY 2``: a copy of the second (expanded) select expression, unless it is a constant;
- ``ORDER BY 2`` (a select's own): the second output's name, when no other output shares it
  — unless it is an unaliased scalar subquery, named by an alias of its own rather than an
  ``Alias`` node, where ``qualify_columns`` fails an assertion (so the full path refuses);
- a HAVING column whose name no aliased output has (``expr AS name``; an unaliased column
  output is not an alias there) is a column of its one source, as anywhere else; a name an
  alias has and no source has becomes a copy of the aliased expression, in parentheses where
  they matter (``HAVING post_count > 10`` → ``HAVING COUNT(*) > 10``). A name both have is left
  to the full path (MySQL and the others read it differently), as is any HAVING name in a
  select with a star, or one sqlglot leaves as written (a constant's alias; an aggregate's,
  inside an aggregate);
- an ORDER BY name that an output has stays as written, inside an expression too
  (``ORDER BY CASE WHEN total IS NULL …``) — unless it sits inside an aggregate, a window or a
  subquery of the term, or is also the name of a table or derived table anywhere in the query
  (``implicit.py`` refuses those as whole rows): the full path decides those.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from sqlglot import exp

__all__ = ["SelectRefs", "Unsupported", "check_copies", "copy_resolved"]

#: Nodes between an ORDER BY name and its term that make the name mean something else.
_OPAQUE = (exp.AggFunc, exp.Window, exp.Query, exp.Subquery)
#: What a select expression may hold to be copied into GROUP BY here.
_NOT_COPIED = (exp.Query, exp.Subquery, exp.Star, exp.Explode, exp.Unnest, exp.Window, exp.AggFunc)
#: What a select expression may hold to be copied into HAVING here (an aggregate, as it
#: mostly is, or ``COUNT(*)``'s star, but nothing with a scope or a window of its own).
_NOT_IN_HAVING = (exp.Query, exp.Subquery, exp.Explode, exp.Unnest, exp.Window)


class Unsupported(Exception):
    """The query uses something the resolver does not model; use ``qualify_columns``."""


class SelectRefs:
    """What one select's other clauses may refer to in its select list."""

    def __init__(self, select: exp.Select, source_names: Callable[[], frozenset[str]],
                 named: set[str] | None = None) -> None:
        self.select = select
        self._named = named
        self.source_names = source_names
        having = select.args.get("having")
        self.having: set[int] = set()
        if having is not None:
            self.having = {id(c) for c in having.find_all(exp.Column) if not c.table and _owner(c) is select}

    @property
    def named(self) -> set[str]:
        """The select's output names (``named_selects``): given by the caller, or found when
        first asked for (a select without HAVING, GROUP BY or ORDER BY names never asks)."""
        if self._named is None:
            self._named = set(self.select.named_selects)
        return self._named

    def having_columns(self) -> list[exp.Column]:
        """The unqualified HAVING columns of this select (``Scope.columns`` leaves them out)."""
        having = self.select.args.get("having")
        return [c for c in having.find_all(exp.Column) if id(c) in self.having] if having is not None else []

    def having_alias(self, column: exp.Column, owned: bool) -> exp.Alias | None:
        """For an unqualified HAVING column of this select: the aliased select expression it
        stands for, or None where it is a source's column (``owned``: some source has the
        name). ``qualify_columns`` (``_expand_alias_refs``) reads only ``expr AS name``
        projections as aliases there, so a name only an unaliased column output has is that
        source column; a name an alias has and no source has becomes a copy of the
        expression. A name both have is read by dialect flags (MySQL's differ): refused, as
        are the shapes where sqlglot leaves the name as written (a constant, an aggregate
        named inside an aggregate)."""
        if id(column) not in self.having:
            return None
        if self.select.is_star:
            raise Unsupported("a HAVING name in a select with a star")  # the star's columns are aliases there
        name = column.name
        if name not in self.named:
            return None
        found = [p for p in self.select.expressions if isinstance(p, exp.Alias) and p.alias == name]
        if not found:
            return None
        if owned:
            raise Unsupported("a HAVING name that is both an output alias and a source's column")
        if len(found) != 1 or Counter(self.select.named_selects)[name] != 1:
            raise Unsupported("a HAVING name that several outputs have")
        expression = found[0].this
        if isinstance(expression, exp.Literal) or expression.is_number or expression.find(*_NOT_IN_HAVING):
            raise Unsupported("a HAVING alias of an expression not copied as written")
        if expression.find(exp.AggFunc) is not None and _inside_aggregate(column):
            raise Unsupported("an aggregate's alias inside an aggregate of HAVING")
        return found[0]

    def alias_reference(self, column: exp.Column) -> exp.Alias:
        """The select expression an unqualified name no source has refers to (GROUP BY only)."""
        if column.name not in self.named or not isinstance(column.parent, exp.Group):
            raise Unsupported("unknown or ambiguous column")
        if column.parent.parent is not self.select or Counter(self.select.named_selects)[column.name] != 1:
            raise Unsupported("a select alias used outside the select list")
        found = [p for p in self.select.expressions if isinstance(p, exp.Alias) and p.alias == column.name]
        if len(found) != 1 or not _copyable(found[0].this):
            raise Unsupported("a select alias that is not copied as written")
        return found[0]

    def check_order(self) -> None:
        """Names of outputs inside ORDER BY terms stay as written (module docstring)."""
        order = self.select.args.get("order")
        if order is None:
            return
        for ordered in order.expressions:
            for column in ordered.find_all(exp.Column):
                if column.table or column.name not in self.named or column is ordered.this:
                    continue
                if column.name.lower() in self.source_names():
                    raise Unsupported("an ORDER BY name that is also a source's name")
                node = column.parent
                while node is not ordered:
                    if isinstance(node, _OPAQUE):
                        raise Unsupported("a select alias inside an aggregate, window or subquery of ORDER BY")
                    node = node.parent

    def check_positions(self, scalar: list[int]) -> None:
        """No ORDER BY position of this select names an unaliased scalar subquery (index in
        ``scalar``): ``qualify_outputs`` names one by an alias of its own, not an ``Alias``
        node, and ``qualify_columns`` fails an assertion on a position of it (a GROUP BY
        position of one is refused by ``group_positions``)."""
        order = self.select.args.get("order")
        for ordered in order.expressions if order is not None else ():
            term = ordered.this
            if isinstance(term, exp.Literal) and term.is_int and int(term.this) - 1 in scalar:
                raise Unsupported("an ORDER BY position of an unaliased scalar subquery")

    def group_positions(self, projections: list[exp.Expr]) -> list[tuple[exp.Literal, exp.Expr]]:
        """``GROUP BY n`` terms to replace, each with the select expression it copies."""
        group = self.select.args.get("group")
        found = []
        for term in group.expressions if group is not None else ():
            if not isinstance(term, exp.Literal):
                continue
            if not term.is_int or not 0 < int(term.this) <= len(projections):
                raise Unsupported("a GROUP BY position out of range")
            expression = projections[int(term.this) - 1].unalias()
            if isinstance(expression, exp.CONSTANTS) or expression.is_number:
                continue  # a constant stays a position
            if not _copyable(expression):
                raise Unsupported("a GROUP BY position of an expression not copied as written")
            found.append((term, expression))
        return found

    def order_positions(self, names: list[str]) -> list[tuple[exp.Literal, int]]:
        """``ORDER BY n`` terms to replace with the output's name (kept where it repeats)."""
        order = self.select.args.get("order")
        terms = [o.this for o in order.expressions if isinstance(o.this, exp.Literal)] if order is not None else []
        if not terms:
            return []
        unique = {name for name, count in Counter(names).items() if count == 1}
        found = []
        for term in terms:
            if not term.is_int or not 0 < int(term.this) <= len(names):
                raise Unsupported("an ORDER BY position out of range")
            if names[int(term.this) - 1] in unique:
                found.append((term, int(term.this) - 1))
        return found


def _owner(column: exp.Column) -> exp.Expr | None:
    return column.find_ancestor(exp.Select)


def _inside_aggregate(column: exp.Column) -> bool:
    """Whether an aggregate (of the HAVING clause itself) encloses ``column``."""
    node = column.parent
    while node is not None and not isinstance(node, exp.Having):
        if isinstance(node, (exp.AggFunc, exp.Window, exp.Query)):
            return True
        node = node.parent
    return False


def _copyable(expression: exp.Expr) -> bool:
    return not isinstance(expression, exp.Literal) and not expression.is_number and expression.find(*_NOT_COPIED) is None


def check_copies(copies: list[tuple[exp.Expr, exp.Expr, bool]], columns: dict[int, object]) -> None:
    """Every column of an expression to copy must have been resolved (planning, not applying)."""
    for _, expression, _ in copies:
        if any(id(c) not in columns for c in expression.find_all(exp.Column)):
            raise Unsupported("a copied expression with a column not resolved here")


def copy_resolved(expression: exp.Expr, columns: dict[int, tuple[exp.Column, exp.Identifier | None, object]]) -> exp.Expr:
    """A copy of ``expression`` whose columns are recorded as reading what the originals read
    (``check_copies`` made sure each original is recorded)."""
    copy = expression.copy()
    for original, new in zip(expression.find_all(exp.Column), copy.find_all(exp.Column)):
        columns[id(new)] = (new, None, columns[id(original)][2])
    return copy
