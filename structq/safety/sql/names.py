"""Pass 1b: the names the query wrote for its result columns, before any rewrite.

Later passes rewrite the select list (columns qualified, identifiers lower-cased for matching,
functions written in upper case), and an engine names an unaliased result column after the
text it received: ``max(kapazität)`` would come back as ``MAX(stadion.kapazität)`` on SQLite,
``max`` on PostgreSQL, and ``sbCustId`` as ``sbcustid``. Plans refer to columns by name
(``<c.sbCustId>``) and answers show them, so the executor labels the result with the names
recorded here (``SafeQuery.names``), the same on every engine:

- ``expr AS alias``: the alias as written (without its quotes);
- a column: its name as written (``t.sbCustId`` → ``sbCustId``);
- anything else: the expression's text as written (``max(kapazität)``), references as
  ``<key>``;
- a name that repeats (without regard to case) gets a suffix from its second occurrence on,
  ``id``, ``id_2``, as ``limit.py`` aliases repeats before wrapping a query and the local
  executor names its tables' columns: a result's columns can always be told apart.

The select list is read from the tokens the parser read (``Check.tokens``: no second
tokenization), those of the outermost SELECT (the first at nesting depth 0: a set operation's
leftmost branch). When that cannot be done exactly — a star, whose columns are known only
after expansion; a select list whose pieces do not match the parsed projections one to one —
no names are recorded and the engine's names stand.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from .context import Check

__all__ = ["record_output_names"]

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
            return None  # DISTINCT ON (…): rare; leave the engine's names
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
    """Set ``check.output_names`` from the query as written (or leave it ``None``)."""
    select = _outer_select(check.tree) if check.tree is not None else None
    if select is None or _has_star_of_columns(check, select):
        return
    items = _select_list(check.tokens)
    if items is None or len(items) != len(select.expressions):
        return
    text = check.parsed_text
    names = []
    for projection, tokens in zip(select.expressions, items):
        last = tokens[-1]
        if isinstance(projection, (exp.Alias, exp.Column)):
            names.append(_unquoted(text[last.start : last.end + 1]))
        else:
            names.append(_written(check, text[tokens[0].start : last.end + 1]))
    check.output_names = _told_apart(names)


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
