"""The state one ``check_sql`` call threads through its rules.

sqlglot's optimizer rules are functions tree → tree. Ours need a little more than the tree
(the manifest, the caller's values, what earlier rules found), so each rule is a function
``Check → None`` that reads and updates this one object. Rules run in a fixed order
(``rules.RULES``); a rule may rely on everything the rules before it recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import Token

from structq.capabilities import Manifest, Table
from structq.errors import SandboxViolation

from .schema import Derived, derived
from .walk import Instances, shared_filed, shared_walk

__all__ = ["Check", "violation"]


def violation(code: str, message: str, hint: str, check: Check | None = None) -> SandboxViolation:
    """A ``SandboxViolation`` tagged with the source it concerns."""
    return SandboxViolation(code, message, hint=hint, source=check.manifest.source if check else None)


@dataclass(eq=False, slots=True)
class Check:
    """Inputs, the tree being checked, and what the rules learn about it."""

    text: str
    manifest: Manifest
    dialect: Dialect
    #: ``manifest.sql_dialect`` (the name ``dialect`` was made from), read once: it is a
    #: property of the manifest, which rules would otherwise compute a dozen times a check.
    sql_dialect: str
    references: Mapping[str, Sequence[Any]]
    variables: Mapping[str, Any]
    max_rows: int
    #: A template plan's slot values by parameter name (``:month_start`` in the text): bound,
    #: never spliced. Any other ``:name`` the author wrote is refused.
    slots: Mapping[str, Any] = field(default_factory=dict)

    #: The parsed statement; rules rewrite it in place.
    tree: exp.Expr | None = None
    #: The text sqlglot parsed (references swapped for placeholders); node positions
    #: (``node.meta["start"]``) index into it.
    parsed_text: str = ""
    #: The tokens of ``parsed_text`` (``rules/output_names.py`` reads the select list as written from them).
    tokens: list[Token] = field(default_factory=list)
    #: Placeholder name → reference text (``members`` or ``members.employee_id``).
    placeholders: dict[str, str] = field(default_factory=dict)

    # Gathered by the single walk after parsing (``parse.scan``), so that later rules need
    # not walk the whole tree again.
    tables: list[exp.Table] = field(default_factory=list)
    columns: list[exp.Column] = field(default_factory=list)
    subqueries: list[exp.Subquery] = field(default_factory=list)
    functions: list[exp.Func] = field(default_factory=list)
    comparisons: list[exp.Expr] = field(default_factory=list)
    bind_nodes: list[exp.Placeholder] = field(default_factory=list)
    forbidden: list[exp.Expr] = field(default_factory=list)
    with_clauses: list[exp.With] = field(default_factory=list)
    #: Every data type named (cast targets, typed literals), nested ones included.
    types: list[exp.DataType] = field(default_factory=list)
    #: Every ``a.b`` that is not a column: a qualified call, a field of a composite value.
    dots: list[exp.Dot] = field(default_factory=list)
    #: Every ``*`` (``SELECT *``, ``t.*``, ``COUNT(*)``).
    stars: list[exp.Star] = field(default_factory=list)
    #: Every ``AS`` the query wrote: output aliases (``exp.Alias``) and the aliases of tables,
    #: derived tables and CTEs (``exp.TableAlias``).
    aliases: list[exp.Expr] = field(default_factory=list)
    #: Every ``exp.Query`` node: selects, set operations, subqueries (the root included).
    queries: list[exp.Query] = field(default_factory=list)
    #: Whether the tree may hold a node some shared filter wants (``walk.py``): ``parse.scan``
    #: saw one, or ``qualify_columns`` rebuilt the tree (``rules/columns.py``). See ``shared_nodes``.
    shared_wanted: bool = False
    #: The nodes ``parse.scan`` saw that some shared filter wants, in its order.
    shared_seen: list[exp.Expr] = field(default_factory=list)
    #: Whether ``shared_seen`` is still every such node of the tree: false once a rule copies
    #: expressions into it or takes some out, or rebuilds it (``qualify_columns``).
    shared_seen_current: bool = True
    #: Whether some identifier of the query needs quotes sqlglot would not write (``quoting.py``:
    #: a reserved word, a name that is not a plain identifier; ``parse.scan``): a copy of it may
    #: be written unquoted later. Generation then quotes every such name.
    quote_names: bool = False
    #: ``id(identifier)`` → the identifier and its text as written, for every identifier
    #: ``parse.scan`` lower-cased: output aliases are written back so (``names.write_aliases``).
    written_case: dict[int, tuple[exp.Identifier, str]] = field(default_factory=dict)

    #: The real tables read (``resolve_tables``): each node with its manifest entry.
    reads: list[tuple[exp.Table, Table]] = field(default_factory=list)
    #: ``id(column)`` → the column and the manifest table it reads, scope by scope
    #: (``check_columns``).
    column_tables: dict[int, tuple[exp.Column, Table]] = field(default_factory=dict)

    # The output.
    #: The result columns' names as the query wrote them (``rules/output_names.py``); None: the database's.
    output_names: tuple[str, ...] | None = None
    #: With a star in the outermost select list: each item's name as written, None for a star
    #: (``rules/output_names.py``), for ``check_columns`` to complete once the stars are expanded.
    written_names: list[str | None] | None = None
    #: Then also: each derived table's and CTE's outputs as written (``rules/output_names.py``).
    sources_written: dict[str, dict[str, str]] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    #: Where each parameter's value comes from, for ``memo.py`` to bind the same query again
    #: with new values: ``("var", name)``, ``("slot", name)`` or a reference's form
    #: (``rules/references.py``). A name given two origins is never remembered.
    origins: dict[str, set[tuple[Any, ...]]] = field(default_factory=dict)
    expanding: set[str] = field(default_factory=set)
    #: PostgreSQL: each long list's switch parameter → the list's parameter (``rules/references.py``).
    switches: dict[str, str] = field(default_factory=dict)
    read_columns: set[str] = field(default_factory=set)
    sql: str = ""

    _names: Derived | None = None
    _shared: dict[Instances, list[exp.Expr]] | None = None

    @property
    def names(self) -> Derived:
        """What ``schema.derived`` computes from the manifest, fetched once per check."""
        found = self._names
        if found is None:
            found = self._names = derived(self.manifest)
        return found

    def shared_nodes(self, wanted: Instances) -> list[exp.Expr]:
        """``wanted(self.tree)`` for a filter made with ``shared=True``: every shared filter is
        answered by the walk of the first call (``walk.py``), so only rules that change
        nothing in the tree, run one after the other, may call this.

        No walk is made when no such node can be in the tree (``shared_wanted`` is false):
        the parsed tree held none, and the rules before the callers (``check_growth``,
        ``check_patterns``) write only columns, identifiers, aliases, parentheses, literals and
        the ``DUAL`` keyword, or copies of nodes already in the tree — all but
        ``qualify_columns``, which sets ``shared_wanted``. Nor is one made while no rule has
        copied nodes into the tree (``shared_seen_current``): the nodes are those the scan
        listed, none of which a rule removes (they replace columns, literals and aliases only).
        The order can then differ from the walk's (an alias added above an expression moves
        it down a level), which changes no outcome: each node is checked on its own, and the
        growth factors multiply.
        """
        if not wanted.shared:
            raise ValueError("only a filter made with shared=True is answered by the shared walk")
        if not self.shared_wanted:
            return []
        found = self._shared
        if found is None:
            assert self.tree is not None
            found = self._shared = shared_filed(self.shared_seen) if self.shared_seen_current else shared_walk(self.tree)
        return found[wanted]

    def bind(self, name: str, value: Any, origin: tuple[Any, ...]) -> None:
        """Bind parameter ``name`` to ``value``, which came from ``origin``."""
        self.params[name] = value
        self.origins.setdefault(name, set()).add(origin)

    def fail(self, code: str, message: str, hint: str) -> SandboxViolation:
        """The violation to raise; rules write ``raise check.fail(...)``."""
        return violation(code, message, hint, self)
