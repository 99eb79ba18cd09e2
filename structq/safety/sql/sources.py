"""Part of ``resolve.py``: the sources one select reads, and the clauses the resolver models.

A source is a manifest table (its allowed columns) or a derived table / CTE whose output
names the resolver already knows (inner scopes are planned first) — or, in a flat query,
MySQL's ``DUAL`` as the one source of a select that no clause can name an alias in. A select
with a clause the resolver does not model, or a source it cannot read the columns of, raises
``Unsupported``.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from .recursive import self_source
from .select_refs import Unsupported
from .tables import visible_ctes

__all__ = ["UNION_ARGS", "Sources", "check_dual", "check_select", "check_shape", "check_with", "lower"]

#: Select clauses the resolver understands; any other one set means the full path.
_SELECT_ARGS = frozenset({"with_", "expressions", "distinct", "from_", "joins", "where", "group",
                          "having", "order", "limit", "offset"})
UNION_ARGS = frozenset({"with_", "this", "expression", "distinct", "order", "limit", "offset"})
_JOIN_ARGS = frozenset({"this", "on", "side", "kind", "using"})  # USING: ``using.py``
_FROM_ARGS = frozenset({"this"})


def lower(name: str) -> str:
    return name.lower()


class Sources:
    """The sources one scope selects from: alias → (node, {lower name: spelling})."""

    __slots__ = ("by_alias", "_written", "_qualifiers", "tables_read", "dual")  # one or more per check

    def __init__(self) -> None:
        self.by_alias: dict[str, tuple[object, dict[str, str]]] = {}
        #: The alias each source was given (``TableAlias``), if any: ``qualifier`` reads it.
        self._written: dict[str, object] = {}
        #: The qualifier node of each source a column was found in (``qualifier``), once asked.
        self._qualifiers: dict[str, exp.Identifier] | None = None
        #: How many of the sources are declared tables (``of_select``).
        self.tables_read = 0
        #: Whether the one source is MySQL's ``DUAL`` (``of_select``).
        self.dual = False

    @classmethod
    def of_scope(cls, scope: Scope, outputs: dict[int, list[str]], tables: dict[int, dict[str, str]]) -> Sources:
        self = cls()
        for alias, (node, source) in scope.selected_sources.items():
            while isinstance(node, exp.Query) and node.alias != alias and node.parent is not None:
                node = node.parent  # a derived table's query: its alias sits on the Subquery
            self._written[alias] = node.args.get("alias")
            if not alias:
                raise Unsupported("unaliased derived table")
            if isinstance(source, Scope):
                names = outputs.get(id(source))
                if names is None:
                    raise Unsupported("a source whose columns are not known yet")
                columns = _query_columns(names)
            elif isinstance(source, exp.Table) and id(source) in tables and not isinstance(source.this, exp.Func):
                columns = tables[id(source)]
            else:
                raise Unsupported("a source that is neither a declared table nor a query")
            self.by_alias[alias] = (source, columns)
        return self

    @classmethod
    def of_select(cls, select: exp.Select, tables: dict[int, dict[str, str]],
                  outputs: Callable[[exp.Expr], list[str]]) -> Sources:
        """The sources of a select of a flat query (``flat.py``): its FROM and JOIN tables,
        derived tables and CTE references, under distinct names; ``outputs(query)`` gives the
        output names of a derived table's or a CTE's query. ``tables_read`` counts the tables
        (the caller makes sure they are all the tables the query reads)."""
        self = cls()
        from_ = select.args.get("from_")
        nodes = []
        if from_ is not None:
            check_shape(from_, _FROM_ARGS)
            nodes.append(from_.this)
        joins = select.args.get("joins")
        if joins:
            nodes += [join.this for join in joins]
        by_alias, written = self.by_alias, self._written
        for node in nodes:
            source: object = node
            table = isinstance(node, exp.Table) and not isinstance(node.this, exp.Func)
            declared = tables.get(id(node)) if table else None
            if declared is not None:
                columns = declared
                self.tables_read += 1
            elif table and (ctes := visible_ctes(node)):  # type: ignore[arg-type]
                if len(ctes) != 1:
                    raise Unsupported("two CTEs of one name")
                source = self_source(node, ctes[0])
                columns = _query_columns(outputs(source))
            elif isinstance(node, exp.Subquery) and isinstance(node.parent, (exp.From, exp.Join)):
                source = node.this
                columns = _query_columns(outputs(source))
            elif _is_dual(node) and len(nodes) == 1:
                columns = {}
                self.dual = True
            else:
                raise Unsupported("a source that is neither a declared table nor a query")
            alias = node.alias_or_name
            if not alias or alias in by_alias:
                raise Unsupported("two sources of one name")
            written[alias] = node.args.get("alias")
            by_alias[alias] = (source, columns)
        return self

    def qualifier(self, alias: str) -> exp.Identifier:
        """The qualifier as the query spells the source's alias (quoted or not), for a column
        that names none; asked for only then, as most columns are qualified already. One node
        per source: ``resolution.apply`` writes a copy of it into each column."""
        qualifiers = self._qualifiers
        if qualifiers is None:
            qualifiers = self._qualifiers = {}  # most selects' columns are all qualified: never built
        found = qualifiers.get(alias)
        if found is None:
            written = self._written[alias]
            found = written.this if isinstance(written, exp.TableAlias) else exp.to_identifier(alias)
            qualifiers[alias] = found
        return found


def _is_dual(node: exp.Expr) -> bool:
    """MySQL's ``FROM DUAL``, as ``tables.py`` writes the keyword back: a source of no columns.
    ``qualify_columns`` sees a table of unknown columns, which changes how it reads a name no
    source has; the resolver takes such a select only where no clause can name one
    (``check_dual``)."""
    return isinstance(node, exp.Table) and isinstance(node.this, exp.Var) and node.this.name == "DUAL" and not any(
        value for key, value in node.args.items() if key != "this")


def check_dual(select: exp.Select, sources: Sources) -> None:
    """A select from ``DUAL`` alone (``sources.dual``: the caller's test), without a star,
    GROUP BY or HAVING: there an unknown source makes ``qualify_columns`` refuse a select alias
    (``_expand_alias_refs``), or keep a star, where the resolver would copy or expand."""
    if sources.dual and (select.is_star or select.args.get("group") or select.args.get("having")):
        raise Unsupported("a star, GROUP BY or HAVING over DUAL")


def _query_columns(names: list[str]) -> dict[str, str]:
    """A derived table's or a CTE's columns, from its query's output names."""
    if len(set(map(lower, names))) != len(names):
        # Which of two same-named columns a reference (or a star) reads is the engine's
        # choice, or its error: ``qualify_columns`` decides.
        raise Unsupported("a derived table with two columns of one name")
    return {lower(n): n for n in names}


def _check_distinct_on(select: exp.Select, on: exp.Expr) -> None:
    """PostgreSQL's ``DISTINCT ON (…)`` where its terms are plain expressions of source
    columns: ``qualify_columns`` then qualifies their columns and changes nothing else. A
    position, a select alias, an aggregate, a window or a subquery in a term, or a GROUP BY
    (which turns a term equal to a select expression into its alias), is for the full path."""
    if select.args.get("group") or not isinstance(on, exp.Tuple):
        raise Unsupported("DISTINCT ON with GROUP BY")
    named = set(select.named_selects)
    for term in on.expressions:
        if isinstance(term, exp.Literal) or term.find(exp.AggFunc, exp.Window, exp.Query, exp.Subquery, exp.Star):
            raise Unsupported("DISTINCT ON of a position, an aggregate, a window or a subquery")
        for column in term.find_all(exp.Column):
            if not column.table and column.name in named:
                raise Unsupported("DISTINCT ON of a select alias")


def check_shape(node: exp.Expr, allowed: frozenset[str]) -> None:
    if allowed.issuperset(node.args):
        return  # every key allowed (a FROM, most joins): no value to look at
    for key, value in node.args.items():
        if value and key not in allowed:
            raise Unsupported(f"clause {key}")


def check_select(select: exp.Select) -> None:
    check_shape(select, _SELECT_ARGS)
    distinct = select.args.get("distinct")
    if distinct is not None and distinct.args.get("on"):
        _check_distinct_on(select, distinct.args["on"])
    for join in select.args.get("joins") or ():
        check_shape(join, _JOIN_ARGS)
    group = select.args.get("group")
    if group is not None:
        if set(k for k, v in group.args.items() if v) - {"expressions"}:
            raise Unsupported("GROUP BY modifiers")


def check_with(query: exp.Query) -> None:
    """Over scopes, no recursive WITH and no CTE column list (a flat query may have them:
    ``recursive.py``)."""
    with_ = query.args.get("with_")
    if with_ is not None and (with_.args.get("recursive") or any(c.args["alias"].columns for c in with_.expressions)):
        raise Unsupported("recursive CTE or CTE column list")
