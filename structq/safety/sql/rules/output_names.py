"""The result columns keep the names the query wrote for them, whatever the rewrites and the database.

Later rules rewrite the select list (columns qualified, identifiers lower-cased for matching,
functions written in upper case), and a database names an unaliased result column after the
text it received: ``max(kapazität)`` would come back as ``MAX(stadion.kapazität)`` on SQLite,
``max`` on PostgreSQL, and ``sbCustId`` as ``sbcustid``. Plans refer to columns by name
(``<c.sbCustId>``) and answers show them, so the executor labels the result with the names
recorded here (``SafeQuery.names``), the same on every database:

- ``expr AS alias``: the alias as written (without its quotes);
- a column: its name as written (``t.sbCustId`` → ``sbCustId``);
- anything else: the expression's text as written (``max(kapazität)``), references as
  ``<key>``;
- a name that repeats (without regard to case) gets a suffix from its second occurrence on,
  ``id``, ``id_2``, as ``limit.py`` aliases repeats before wrapping a query and the local
  executor names its tables' columns: a result's columns can always be told apart.

- a column a star expanded to (``SELECT *``, ``t.*``): known only after expansion, so this
  rule records the other items' names and ``check_columns`` completes the list
  (``name_expanded``) with each expanded column's name: the manifest's spelling for a table's
  column (``Shop_ID``, where the rewritten query aliases it ``shop_id`` for matching); a
  derived table's or CTE's column by its name there as written (``x.*`` over
  ``(SELECT a AS Total …) x`` gives ``Total``), or lower-cased for matching as every
  identifier is where that select list is more than columns and aliased items.

The select list is read from the tokens the parser read (``Check.tokens``: no second
tokenization), those of the outermost SELECT (the first at nesting depth 0: a set operation's
leftmost branch). When that cannot be done exactly — a select list whose pieces do not match
the parsed projections one to one, a star inside an item (``(SELECT * …)``), expanded columns
that cannot be told from the items around them — no names are recorded and the database's
names stand.

The SQL that runs writes each output alias the query wrote as it was written
(``write_aliases``), although the rules match names in lower case: it is shown to the user
as what ran, and ``customer.CustomerId AS customerid`` is not what ``AS CustomerId`` said.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from ..context import Check

__all__ = ["is_star_item", "name_expanded", "record_output_names", "write_aliases"]

_OPEN = {TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE}
_CLOSE = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE}
#: Tokens that end a select list at depth 0.
_END = {getattr(TokenType, name) for name in (
    "FROM", "WHERE", "GROUP_BY", "HAVING", "WINDOW", "QUALIFY", "ORDER_BY", "LIMIT", "OFFSET", "FETCH",
    "UNION", "INTERSECT", "EXCEPT", "INTO", "SEMICOLON", "CLUSTER_BY", "DISTRIBUTE_BY", "SORT_BY",
) if hasattr(TokenType, name)}
_QUOTES = {'"': '"', "`": "`", "[": "]"}
# Looked up once: an attribute of ``TokenType`` costs more than the comparison it is for.
_SELECT, _COMMA, _ON = TokenType.SELECT, TokenType.COMMA, TokenType.ON
_QUANTIFIERS = (TokenType.DISTINCT, TokenType.ALL)


def _outer_select(tree: exp.Expr) -> exp.Select | None:
    node = tree
    while isinstance(node, exp.SetOperation):
        node = node.this
    return node if isinstance(node, exp.Select) else None


def _select_list(tokens: list[Token]) -> list[list[Token]] | None:
    """The tokens of each item of the first depth-0 SELECT's list."""
    depth, start = 0, None
    for i, token in enumerate(tokens):
        if token.token_type in _OPEN:
            depth += 1
        elif token.token_type in _CLOSE:
            depth -= 1
        elif depth == 0 and token.token_type is _SELECT:
            start = i + 1
            break
    if start is None:
        return None
    while start < len(tokens) and tokens[start].token_type in _QUANTIFIERS:
        start += 1
        if start < len(tokens) and tokens[start].token_type is _ON:
            return None  # DISTINCT ON (…): rare; leave the database's names
    items: list[list[Token]] = [[]]
    depth = 0
    for token in tokens[start:]:
        kind = token.token_type
        if depth == 0 and (kind in _END or kind in _CLOSE):
            break
        if kind in _OPEN:
            depth += 1
        elif kind in _CLOSE:
            depth -= 1
        if depth == 0 and kind is _COMMA:
            items.append([])
            continue
        items[-1].append(token)
    return items if all(items) else None


def _unquoted(text: str) -> str:
    close = _QUOTES.get(text[:1])
    if close and text.endswith(close) and len(text) >= 2:
        return text[1:-1].replace(close * 2, close)
    return text


def record_output_names(check: Check) -> None:
    """Set ``check.output_names`` from the query as written (or leave it ``None``); with a
    star in the select list, set ``check.written_names`` for ``name_expanded`` instead."""
    select = _outer_select(check.tree) if check.tree is not None else None
    if select is None:
        return
    stars = None
    if check.stars and _has_star_of_columns(check, select):
        expressions = select.expressions
        if len(expressions) == 1 and is_star_item(expressions[0]):  # ``SELECT *``: nothing to read
            check.written_names = [None]
            check.sources_written = _outputs_of_from_items(check)
            return
        stars = [is_star_item(projection) for projection in expressions]
        if not any(stars):
            return  # a star inside an item, ``(SELECT * …)``
    text = check.parsed_text
    names = _names_of_identifiers(select, text, stars)
    if names is None:
        names = _names_of_tokens(check, select, stars)
        if names is None:
            return
    if stars:
        check.written_names = names
        check.sources_written = _outputs_of_from_items(check)
    else:
        check.output_names = _told_apart(names)  # type: ignore[arg-type]  # no None without a star


def _names_of_identifiers(select: exp.Select, text: str, stars: list[bool] | None) -> list[str | None] | None:
    """The names of a select list of columns, aliased items and stars only (most lists),
    from the position of each one's last identifier in the text (its ``meta``, which the
    parser takes from the same token ``_select_list`` would end the item with); None for
    any other list, or an identifier without a position."""
    distinct = select.args.get("distinct")
    if distinct is not None and distinct.args.get("on") is not None:
        return None  # as ``_select_list``
    names: list[str | None] = []
    for i, projection in enumerate(select.expressions):
        if stars and stars[i]:
            names.append(None)
            continue
        if type(projection) is exp.Alias:
            identifier = projection.args.get("alias")
        elif type(projection) is exp.Column:
            identifier = projection.this
        else:
            return None
        if not isinstance(identifier, exp.Identifier):
            return None
        meta = identifier.meta
        start, end = meta.get("start"), meta.get("end")
        if start is None or end is None:
            return None
        names.append(_unquoted(text[start : end + 1]))
    return names


def _names_of_tokens(check: Check, select: exp.Select, stars: list[bool] | None) -> list[str | None] | None:
    """The names of any select list, from its tokens; None where they do not match the
    parsed projections one to one."""
    items = _select_list(check.tokens)
    if items is None or len(items) != len(select.expressions):
        return None
    text = check.parsed_text
    names: list[str | None] = []
    for i, (projection, tokens) in enumerate(zip(select.expressions, items)):
        last = tokens[-1]
        if stars and stars[i]:
            names.append(None)
        elif isinstance(projection, (exp.Alias, exp.Column)):
            names.append(_unquoted(text[last.start : last.end + 1]))
        else:
            names.append(_written(check, text[tokens[0].start : last.end + 1]))
    return names


def _outputs_of_from_items(check: Check) -> dict[str, dict[str, str]]:
    """Alias of each derived table and CTE (and of a table that reads a CTE under an alias of
    its own) → its outputs' names as written, by their names lower-cased for matching: what a
    star over it is named by. One whose list is not made of columns and aliased items only, a
    CTE with a column list, and an alias the query gives more than one FROM item (which one a
    star reads is then a matter of scopes) are left out."""
    named: list[tuple[str, dict[str, str] | None]] = []
    for subquery in check.subqueries:
        if subquery.alias:
            named.append((subquery.alias.lower(), _outputs_written(check, subquery.this)))
    ctes: dict[str, dict[str, str] | None] = {}
    for with_ in check.with_clauses:
        for cte in with_.expressions:
            outputs = None if cte.args["alias"].columns else _outputs_written(check, cte.this)
            named.append((cte.alias.lower(), outputs))
            ctes[cte.alias.lower()] = None if cte.alias.lower() in ctes else outputs
    if ctes:
        for table in check.tables:
            if table.alias and table.name.lower() in ctes:
                named.append((table.alias.lower(), ctes[table.name.lower()]))
    found: dict[str, dict[str, str]] = {}
    seen: set[str] = set()
    for alias, outputs in named:
        if alias in seen:
            found.pop(alias, None)
        elif outputs is not None:
            found[alias] = outputs
        seen.add(alias)
    return found


def _outputs_written(check: Check, query: exp.Expr) -> dict[str, str] | None:
    """A query's outputs as written, by their lower-case names (``_outputs_of_from_items``)."""
    select = _outer_select(query)
    names = _names_of_identifiers(select, check.parsed_text, None) if select is not None else None
    if names is None:
        return None
    return {p.alias_or_name.lower(): n for p, n in zip(select.expressions, names)}  # type: ignore[union-attr, misc]


def is_star_item(projection: exp.Expr) -> bool:
    """``*`` or ``t.*`` as a select item."""
    return isinstance(projection, exp.Star) or (isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star))


def name_expanded(check: Check, written: list[str | None], before: list[exp.Expr], projections: list[exp.Expr]) -> None:
    """Set ``check.output_names`` once the stars of the outermost select are expanded.

    ``written`` holds the items' names as written, None for a star; ``before`` the items'
    nodes before qualification (held, so that no new node can take the ``id()`` of one that
    qualification dropped); ``projections`` the select list after it. An item is found again
    as the same node or as the expression an alias was put around; what lies between is what
    a star expanded to, named by ``_expanded_name``. Anything that does not line up (an item
    qualification replaced, as a USING column's ``COALESCE``) leaves the database's names.
    """
    if written == [None]:  # a lone star: every projection is one of its columns
        unaliased = [projection.this if type(projection) is exp.Alias else projection for projection in projections]
        check.output_names = _told_apart([_expanded_name(check, p, inner) for p, inner in zip(projections, unaliased)])
        return
    position = {id(node): i for i, node in enumerate(before) if written[i] is not None}
    names: list[str] = []
    at = 0  # the next item not yet matched
    for projection in projections:
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        item = position.get(id(projection), position.get(id(inner)))
        if item is not None:
            if item < at or any(name is not None for name in written[at:item]):
                return  # an item out of order, or one before it not found
            names.append(written[item])  # type: ignore[arg-type]  # a non-star item
            at = item + 1
        elif at < len(written) and written[at] is None:
            names.append(_expanded_name(check, projection, inner))
        else:
            return
    if any(name is not None for name in written[at:]):
        return
    check.output_names = _told_apart(names)


def _expanded_name(check: Check, projection: exp.Expr, inner: exp.Expr) -> str:
    """A star's column: a table's column as its node is written (the manifest's spelling, once
    ``check_columns`` respelled it), a derived table's or CTE's as its own select list wrote it
    (``_outputs_of_from_items``). A USING column is written ``COALESCE(a.id, b.id) AS id``: named
    as its first column is."""
    if type(inner) is exp.Coalesce:
        inner = inner.this
    if type(inner) is exp.Column and (inner is projection or _same_name(projection.args["alias"].this, inner.this.this)):
        if id(inner) not in check.column_tables:
            written = check.sources_written.get(inner.table.lower(), {}).get(inner.name.lower())
            if written is not None:
                return written
        return inner.name
    return projection.alias_or_name


def _same_name(alias: str, name: str) -> bool:
    return alias == name or alias.lower() == name.lower()


def _told_apart(names: list[str]) -> tuple[str, ...]:
    taken = {name.lower() for name in names}
    if len(taken) == len(names):
        return tuple(names)  # no name repeats (most queries)
    seen: set[str] = set()
    out = []
    for name in names:
        if name.lower() in seen:
            suffix = 2
            while f"{name}_{suffix}".lower() in taken:
                suffix += 1
            name = f"{name}_{suffix}"
            taken.add(name.lower())
        seen.add(name.lower())
        out.append(name)
    return tuple(out)


def _has_star_of_columns(check: Check, select: exp.Select) -> bool:
    """Whether a projection of ``select`` holds a star of columns (``*``, ``t.*``, in a
    subquery too); a star inside a function call (``COUNT(*)``) is none.

    From the stars ``parse.scan`` listed (the tree is as parsed), each followed up to the
    select: searching each projection for one would walk the whole select list.
    """
    for star in check.stars:
        if isinstance(star.parent, exp.Func):
            continue
        node: exp.Expr = star
        while node.parent is not None and node.parent is not select:
            node = node.parent
        if node.parent is select and node.arg_key == "expressions":
            return True
    return False


def _written(check: Check, text: str) -> str:
    """Expression text as the author wrote it: references back in their ``<…>`` form."""
    for name, reference in check.placeholders.items():
        text = text.replace(" :" + name + " ", "<" + reference + ">").replace(":" + name, "<" + reference + ">")
    return text


def write_aliases(check: Check) -> None:
    """Write back each output alias (``expr AS alias``) the query wrote in the case it was
    written; every other name stays as the rules matched it.

    Only where the database still matches it with every name that referred to it:

    - an alias written bare is written bare again (``AS CustomerId``), and so is a bare column
      name that names no manifest column (``ORDER BY Total``, ``t.Cid`` of a derived table):
      PostgreSQL folds such a name to lower case, SQLite and MariaDB match column names and
      aliases without regard to case. Not a word the dialect reserves, nor a name that needs
      quotes: those are written quoted, where PostgreSQL would not fold them. Qualifiers stay
      as matched (MariaDB's table aliases are case-sensitive);
    - an alias written quoted is written quoted (``AS "CustId"``) on SQLite and MariaDB (the
      case of a column name or alias matters to neither), and so are the column names that
      name no manifest column there; on PostgreSQL, where it does, only when every name
      of the query spelled like it in lower case was written exactly so, quoted, by the query
      (a reference ``ORDER BY "CustId"``), and names neither a table nor a manifest column:
      those are then written back together. Otherwise the alias stays in lower case, matching
      its references as before.
    """
    written = check.written_case
    if not written:
        return
    for alias in check.aliases:
        if type(alias) is not exp.Alias:
            continue
        identifier = alias.args.get("alias")
        found = written.get(id(identifier))
        if found is None or found[0] is not identifier:
            continue
        if not identifier.quoted:
            _write_bare(check, identifier, found[1])
        elif check.sql_dialect != "postgres":
            identifier.set("this", found[1])
        else:
            _write_quoted_alias(check, identifier, found[1])
    for column in check.columns:  # a reference to an alias, or to a derived table's column
        identifier = column.this
        found = written.get(id(identifier))
        if found is None or found[0] is not identifier or id(column) in check.column_tables:
            continue
        if not identifier.quoted:
            _write_bare(check, identifier, found[1])
        elif check.sql_dialect != "postgres":
            identifier.set("this", found[1])


def _write_bare(check: Check, identifier: exp.Identifier, spelling: str) -> None:
    """A bare name in its written case, unless generation would quote it (``quoting.py``)."""
    matched = identifier.this
    if matched not in check.names.reserved and matched.isidentifier():
        identifier.set("this", spelling)


def _write_quoted_alias(check: Check, identifier: exp.Identifier, spelling: str) -> None:
    """PostgreSQL: ``identifier`` and every name spelled like it, written back together, when
    the query wrote each of them as ``spelling``, quoted (``write_aliases``)."""
    assert check.tree is not None
    matched, written = identifier.this, check.written_case
    same = [node for node in check.tree.find_all(exp.Identifier) if node.this == matched]
    for node in same:
        found = written.get(id(node))
        if found is None or found[0] is not node or found[1] != spelling or not node.quoted:
            return  # a name the sandbox wrote, or one the query wrote otherwise
        parent = node.parent
        if isinstance(parent, exp.Table) or (isinstance(parent, exp.Column) and id(parent) in check.column_tables):
            return  # a table's or a manifest column's name, spelled as the manifest says
    for node in same:
        node.set("this", spelling)
