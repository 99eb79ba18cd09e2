"""A column resolver over the manifest: the fast path of ``check_columns``.

sqlglot's ``qualify_columns`` handles every construct of every dialect and costs most of the
sandbox's time. Most queries use a small part of SQL, so this module resolves those itself,
from one ``traverse_scope`` — or, when the query is flat (one select, as most are, or set
operations, subqueries, derived tables and CTEs of plain selects, recursive ones too;
``flat.py``, ``recursive.py``), straight from each select's FROM / JOIN sources and the
columns ``parse.scan`` collected, without building scopes (a select over one declared table
in a single pass: ``one_table.py``) — and gives up (``Unsupported``) on anything it does not
model: the caller then runs ``qualify_columns`` on the untouched tree. It never accepts what it does
not understand, and it never reports an error itself — an unknown or ambiguous column also
raises ``Unsupported``, so refusals (and their messages) always come from the full path.

Resolution is planned first and applied (``resolution.py``) only when the whole query is
understood, so that giving up leaves the tree exactly as parsed. What it plans, scope by
scope, innermost first:

- each column's source: a qualified column must name a source of its scope (or of an
  enclosing scope, when the subquery is correlated) that has that column; an unqualified one
  must match exactly one source of its own scope. Sources are manifest tables (allowed
  columns only) and derived tables / CTEs (their output names, known because inner scopes
  are resolved first) (``select_columns.py``);
- ``*`` and ``t.*`` expanded to those columns, in source order (``select_columns.py``);
- output aliases (``t.x AS x``, ``COUNT(*) AS _col_1``), and ORDER BY terms that repeat a
  grouped select expression rewritten to its alias — as ``qualify_columns`` writes them,
  so both paths produce the same SQL;
- GROUP BY, HAVING and ORDER BY terms that refer to the select list by name or position
  (``select_refs.py``), rewritten the same way;
- USING joins, rewritten into ON conditions, and unqualified USING columns into
  ``COALESCE`` (``using.py``).

Not modelled (so: the full path): NATURAL joins, lateral joins, pivots, table functions,
select aliases referred to in WHERE or the select list itself, column lists on derived tables
(and on CTEs of a WITH that is not recursive), QUALIFY, named windows, three-part column
names, star modifiers; recursive CTEs and CTE column lists but as ``recursive.py`` reads them
(over scopes: none at all); a star over a USING join; a HAVING name that is both an alias and
a source's column; DISTINCT ON of anything but plain expressions of source columns
(``sources.py``); MySQL's ``DUAL`` beside other sources or under a star, GROUP BY or HAVING; a
position (of ORDER BY, GROUP BY or a set operation's ORDER BY) naming an unaliased scalar
subquery of a select list (``qualify_columns`` fails there).

``tests/test_sandbox_resolver.py`` checks both paths against each other over the corpora and
generated shapes: same resolution, same outcome, same SQL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from types import MappingProxyType

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.optimizer.scope import Scope, traverse_scope

from .flat import FlatParts, flat_parts
from .one_table import plan_one_table
from .recursive import check_alias_copies, rename, renamed_outputs
from .resolution import Resolution, apply, output_name
from .select_columns import expanded, plan_columns
from .select_refs import SelectRefs, Unsupported, check_copies
from .sources import UNION_ARGS, Sources, check_dual, check_select, check_shape, check_with
from .using import plan_using

__all__ = ["Unsupported", "Resolution", "resolve_columns"]

#: ``_Query.renamed`` of a query without a recursive WITH: shared, never written.
_NO_RENAMES: Mapping[int, list[str]] = MappingProxyType({})
#: The clauses ``Scope.columns`` looks for around a column (``_is_order_alias``).
_COLUMN_CLAUSES = (exp.Select, exp.Qualify, exp.Order, exp.Cluster, exp.Having, exp.Hint, exp.Table, exp.Star,
                   exp.Distinct)


class _Query:
    """What the whole query tells the planning of each select."""

    __slots__ = ("tables", "plan", "_source_names", "_names", "renamed", "recursive")

    def __init__(self, tables: dict[int, dict[str, str]], source_names: Callable[[], frozenset[str]],
                 plan: Resolution) -> None:
        #: ``id()`` of each real-table node → its allowed columns (``resolve_columns``).
        self.tables = tables
        self.plan = plan
        self._source_names = source_names
        self._names: frozenset[str] | None = None
        #: Selects a CTE column list renames (``recursive.py``); empty without a recursive WITH
        #: (one shared empty mapping, not a dict per query).
        self.renamed: Mapping[int, list[str]] = _NO_RENAMES
        #: Whether a WITH of the query is recursive (``recursive.py``).
        self.recursive = False

    def source_names(self) -> frozenset[str]:
        """Lower-case names of every table and derived table in the query (``select_refs.py``),
        asked for only by an ORDER BY that names an output: most queries never build them."""
        if self._names is None:
            self._names = self._source_names()
        return self._names

    def outer_source(self, where: Scope | exp.Select, alias: str) -> Sources | None:
        """For a correlated column of the scope ``where``: the sources of the nearest
        enclosing scope that defines ``alias``. (A method rather than a closure per select:
        nothing to build for the selects, most of them, that have no such column.)"""
        assert isinstance(where, Scope)
        parent = where.parent
        while parent is not None:
            if alias in parent.selected_sources:
                return Sources.of_scope(parent, self.plan.outputs, self.tables)
            parent = parent.parent
        return None


class _FlatQuery(_Query):
    """A flat query (``flat.py``) planned without scopes: each part planned once, on demand —
    a derived table's or a CTE's query when a select reading it needs its output names, any
    other in the order listed — and each select's sources built once."""

    __slots__ = ("_parts", "_planning", "_selects", "tables_read", "_one_table")

    def __init__(self, tables: dict[int, dict[str, str]], source_names: Callable[[], frozenset[str]],
                 parts: FlatParts, plan: Resolution) -> None:
        super().__init__(tables, source_names, plan)
        self._parts = parts
        self._planning: set[int] = set()
        self._selects: dict[int, Sources] = {}
        #: How many declared tables the planned selects read.
        self.tables_read = 0
        #: ``id()`` of the selects planned by ``one_table.py``, whose table is counted.
        self._one_table: set[int] = set()

    def outputs(self, node: exp.Expr) -> list[str]:
        """The output names of a part, planned first if it was not."""
        key = id(node)
        found = self.plan.outputs.get(key)
        if found is not None:
            return found
        part = self._parts.get(key)
        if part is None or key in self._planning:
            raise Unsupported("a query whose output names are not known yet")
        self._planning.add(key)
        columns = part[1]
        if isinstance(node, exp.Select):
            # A select a CTE column list renames is the general planner's (``_plan_body``).
            if key not in self.renamed and plan_one_table(node, columns, self.tables, self.plan):
                self._one_table.add(key)
                if key not in self._selects:  # not counted yet by ``select_sources``
                    self.tables_read += 1
            else:
                _plan_plain_select(node, columns, self.plan, self)
        else:
            if columns:
                raise Unsupported("columns in a set operation")
            self.plan.outputs[key] = _plan_set_operation(node, self.outputs(node.this), self.plan, self)
        self._planning.discard(key)
        return self.plan.outputs[key]

    def check_tables_read(self) -> None:
        """Once every part is planned: the declared tables their selects read are all the
        query's tables (none read elsewhere, as in a table function's argument)."""
        if self.tables_read != len(self.tables):
            raise Unsupported("a table read outside FROM and JOIN")

    def select_sources(self, select: exp.Select) -> Sources:
        """``Sources.of_select(select)``, built once per select: for its own columns, and for
        the correlated columns of the subqueries it encloses."""
        found = self._selects.get(id(select))
        if found is None:
            found = self._selects[id(select)] = Sources.of_select(select, self.tables, self.outputs)
            if id(select) not in self._one_table:  # its table counted when it was planned
                self.tables_read += found.tables_read
        return found

    def outer_source(self, where: Scope | exp.Select, alias: str) -> Sources | None:
        """For a correlated column of the select ``where``: the sources of the nearest select
        around it that defines ``alias`` — as ``_Query.outer_source`` looks through the
        enclosing scopes."""
        node = where.parent
        while node is not None:
            if isinstance(node, exp.Select):
                sources = self.select_sources(node)
                if alias in sources.by_alias:
                    return sources
            node = node.parent
        return None


def _plan_body(select: exp.Select, columns: list[exp.Column], sources: Sources, plan: Resolution,
               where: Scope | exp.Select, query: _Query, named: set[str] | None = None) -> list[str]:
    """Plan one select's columns, stars and references to its own list; its output names.
    ``where``: its scope, or the select itself in a flat query (``select_columns.plan_columns``); ``named``:
    the select's ``named_selects``, when the caller has them."""
    clauses = select.args  # the steps for an absent clause are skipped: most selects have few
    having, group, order = clauses.get("having"), clauses.get("group"), clauses.get("order")
    # Only HAVING, GROUP BY and ORDER BY refer to the select list.
    refs = (SelectRefs(select, query.source_names, named)
            if having is not None or group is not None or order is not None else None)
    start = len(plan.copies)
    if having is not None:
        columns = columns + refs.having_columns()  # type: ignore[union-attr]
    using = plan_using(select, sources, plan) if clauses.get("joins") else None
    replaced = plan_columns(select, columns, sources, plan, query, where, refs, using)
    projections = expanded(select, sources, plan)
    if replaced:
        projections = [replaced.get(id(p), p) for p in projections]
    names: list[str] = []
    scalar: list[int] | None = None  # built for the first scalar subquery: most lists have none
    for index, projection in enumerate(projections):  # one loop for both: it runs per select
        names.append(output_name(projection, index))
        if isinstance(projection, exp.Subquery):
            if scalar is None:
                scalar = []
            scalar.append(index)
    if scalar is not None:
        # Named ``_col_<n>`` by an alias of its own (``resolution.py``): a position naming it
        # is where ``qualify_columns`` fails (``select_refs.py``), so the full path decides.
        if refs is not None:
            refs.check_positions(scalar)
        plan.scalar_positions[id(select)] = scalar
    if group is not None:
        plan.copies += [(term, expression, False) for term, expression in refs.group_positions(projections)]  # type: ignore[union-attr]
    if len(plan.copies) > start:
        check_copies(plan.copies[start:], plan.columns)
    if query.renamed and id(select) in query.renamed:
        names = rename(names, query.renamed[id(select)], projections)
        plan.renamed.append((select, query.renamed[id(select)]))
    if query.recursive and len(plan.copies) > start:
        check_alias_copies(select, plan.copies[start:])
    if order is not None:
        plan.select_positions += [(term, select, index) for term, index in refs.order_positions(names)]  # type: ignore[union-attr]
    plan.projections.append((select, projections))
    return names


def _plan_select(scope: Scope, plan: Resolution, query: _Query) -> None:
    select = scope.expression
    check_select(select)
    check_with(select)
    sources = Sources.of_scope(scope, plan.outputs, query.tables)
    plan.outputs[id(scope)] = _plan_body(select, scope.columns, sources, plan, scope, query)


def _plan_union(scope: Scope, plan: Resolution, query: _Query) -> None:
    left = scope.set_operation_scopes[0]
    names = plan.outputs.get(id(left))
    if names is None:
        raise Unsupported("set operation over an unresolved branch")
    if scope.columns:
        raise Unsupported("columns in a set operation")
    check_with(scope.expression)
    plan.outputs[id(scope)] = _plan_set_operation(scope.expression, names, plan, query)


def _plan_set_operation(union: exp.SetOperation, names: list[str], plan: Resolution, query: _Query) -> list[str]:
    """A set operation's ORDER BY positions, given its left branch's output names; its names."""
    check_shape(union, UNION_ARGS)
    order = union.args.get("order")
    if order is not None:
        left: exp.Expr = union
        while isinstance(left, exp.SetOperation):
            left = left.this.unnest()  # the select whose projections ``union.selects`` are
        scalar = plan.scalar_positions.get(id(left), ())
        unique = {name for name, count in Counter(names).items() if count == 1}
        for ordered in order.expressions:
            term = ordered.this
            if isinstance(term, exp.Literal) and term.is_int and 0 < int(term.this) <= len(names):
                if int(term.this) - 1 in scalar:
                    raise Unsupported("a set operation's ORDER BY position of an unaliased scalar subquery")
                name = names[int(term.this) - 1]
                if name not in unique:
                    continue  # the position stays, as ``qualify_columns`` leaves it
                plan.positions.append((term, name))
            elif isinstance(term, exp.Column) and not term.table and term.name in names:
                name = term.name
            else:
                raise Unsupported("ORDER BY of a set operation that is not an output name")
            if name.lower() in query.source_names():
                raise Unsupported("an ORDER BY name that is also a source's name")  # ``implicit.py``: a whole row
    return list(names)


def _is_order_alias(column: exp.Column, select: exp.Select, named: set[str]) -> bool:
    """Whether ``Scope.columns`` leaves ``column`` out as a reference to a select alias: an
    unqualified name of an output, in the select's own ORDER BY (not a window's)."""
    if column.table or column.name not in named:
        return False
    clause = column.find_ancestor(*_COLUMN_CLAUSES)
    return isinstance(clause, (exp.Order, exp.Distinct)) and clause.parent is select


def _plan_plain_select(select: exp.Select, columns: list[exp.Column], plan: Resolution, query: _FlatQuery) -> None:
    """``_plan_select`` for a select of a flat query (``flat.py``), without scopes.

    Its sources are its FROM and JOIN tables, derived tables and CTE references, and its
    columns every column whose nearest select it is, but the ``t.*`` stars (``select_columns.plan_columns``
    skips them) and the ORDER BY references to select aliases that ``Scope.columns`` leaves
    out. Any other column is
    resolved here — a superset of what sqlglot's scope would list, so nothing escapes.
    """
    check_select(select)
    sources = query.select_sources(select)
    if sources.dual:
        check_dual(select, sources)
    if select.args.get("order") is not None:
        named: set[str] | None = set(select.named_selects)
        # A column whose parent is the select is one of its items, never an ORDER BY term:
        # told apart without a search for its clause (most columns of a short select).
        own = [c for c in columns if c.parent is select or c.name not in named or not _is_order_alias(c, select, named)]
    else:
        # No ORDER BY of its own: no column refers to a select alias (``_is_order_alias``);
        # ``select_columns.plan_columns`` skips the ``t.*`` stars.
        named = None
        own = columns
    plan.outputs[id(select)] = _plan_body(select, own, sources, plan, select, query, named)


def _plan_scopes(tree: exp.Expr, plan: Resolution, query: _Query) -> None:
    for scope in traverse_scope(tree):
        expression = scope.expression
        if isinstance(expression, exp.Select):
            _plan_select(scope, plan, query)
        elif isinstance(expression, exp.SetOperation):
            _plan_union(scope, plan, query)
        else:
            raise Unsupported(f"a {expression.key} scope")


def resolve_columns(
    tree: exp.Expr,
    tables: dict[int, dict[str, str]],
    columns: list[exp.Column] | None = None,
    queries: list[exp.Query] | None = None,
    *,
    source_names: Callable[[], frozenset[str]] = frozenset,
    dialect: Dialect | None = None,
) -> Resolution:
    """Plan every scope, then apply; raises ``Unsupported`` before touching the tree.

    ``tables`` maps ``id()`` of each real-table node to its allowed columns (lower-case name
    → manifest spelling). ``columns`` and ``queries``, when given, list every column node
    and every query node of the tree (parents first): a flat
    query (``flat.py``) is then planned without sqlglot's scopes — a single select that is
    not understood so goes straight to the full path, anything else is planned over scopes
    first. ``source_names`` gives the lower-case names (and aliases) of every table and
    derived table of the query; ``dialect`` is the one ``qualify_columns`` would be given.
    """
    if columns is not None and queries is not None:
        plan = Resolution()
        if len(queries) == 1 and queries[0] is tree and isinstance(tree, exp.Select):
            # One select, as most queries are: planned in one pass if it reads one table
            # (``one_table.py``), else straight from its sources (it reads no other query's
            # outputs: no parts to look up), or given up for the full path.
            if not (len(tables) == 1 and plan_one_table(tree, columns, tables, plan)):
                query = _FlatQuery(tables, source_names, {}, plan)
                _plan_plain_select(tree, columns, plan, query)
                query.check_tables_read()
            apply(plan, dialect)
            return plan
        try:
            parts = flat_parts(queries, columns)
            query = _FlatQuery(tables, source_names, parts, plan)
            withs = [w for q in queries if (w := q.args.get("with_")) is not None]
            if not withs:
                pass  # most multi-select queries: nothing recursive, no CTE column list
            elif any(w.args.get("recursive") for w in withs):
                query.recursive = True
                query.renamed = renamed_outputs(withs)
            elif any(c.args["alias"].columns for w in withs for c in w.expressions):
                raise Unsupported("a CTE column list in a WITH that is not recursive")
            for node, _ in parts.values():
                query.outputs(node)
            query.check_tables_read()
        except Unsupported:
            pass  # planned over scopes, below
        else:
            apply(plan, dialect)
            return plan
    plan = Resolution()
    _plan_scopes(tree, plan, _Query(tables, source_names, plan))
    apply(plan, dialect)
    return plan
