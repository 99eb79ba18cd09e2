"""Pass 10: the SQL that runs is regenerated from the checked tree, never the caller's text.

Comments are never kept. A person reading the query in a log must see what ran, and a
comment can say otherwise (``/* read-only */``); MySQL even executes ``/*! … */`` comments,
so echoing one would run text no pass has checked. Optimizer hints (``/*+ … */``) are not
comments to sqlglot and are refused earlier (``statement.py``).

Every bound value appears as ``:name``, the ``sqlalchemy.text()`` form, whatever the dialect
(sqlglot's PostgreSQL generator would print ``%(name)s``): placeholders are swapped for
verbatim ``:name`` nodes just before generation.

``text()`` reads any ``:word`` as a bind, including one inside a string literal (``'10:30'``)
or a quoted identifier. So colons inside literals and identifiers are marked before generation
and written as ``\\:``, which ``text()`` turns back into ``:``. A last check re-reads the text
the way ``text()`` will and insists that the binds it finds are exactly the parameters bound;
anything else is refused rather than run.

What one engine of the dialect could not run is rewritten first (``portable.py``: MariaDB has
no ``REGEXP_LIKE``). A name that needs quotes — a word the engine reserves, a name that is not
a plain identifier — is written quoted wherever it is (``quoting.py``). Output aliases are
written in the case the query wrote them (``names.write_aliases``).
"""

from __future__ import annotations

import re
import secrets

from sqlglot import exp

from .context import Check
from .dialects import generate_text
from .names import write_aliases
from .portable import make_portable

__all__ = ["generate"]

#: SQLAlchemy's own pattern for a bind in ``text()`` (sqlalchemy.sql.elements.TextClause).
_TEXT_BIND = re.compile(r"(?<![:\w\x5c]):(\w+)(?!:)", re.UNICODE)
_TEXTUAL = (exp.Literal, exp.Identifier, exp.JSONPathKey, exp.National, exp.RawString)


def _mark_colons(tree: exp.Expr) -> str | None:
    """Swap ``:`` in literal and identifier text for a per-call marker; return the marker."""
    marker = "\ue000" + secrets.token_hex(4) + "\ue001"
    used = False
    for node in tree.bfs():
        if isinstance(node, _TEXTUAL) and isinstance(node.this, str) and ":" in node.this:
            node.set("this", node.this.replace(":", marker))
            used = True
    return marker if used else None


#: A colon that ``text()`` could take for the start of a bind: one that no word character
#: comes right before (``' :x'``, ``'\\:x'``, ``'::'``, a colon at a literal's start).
_BIND_COLON = re.compile(r"(?<!\w):", re.UNICODE)


def _may_read_as_bind(text: str) -> bool:
    """Whether a literal or identifier of the query's own text may hold a colon ``text()``
    reads as a bind once regenerated. A colon right after a word character (``'10:30'``,
    ``'1:54%'``) never starts one (``_TEXT_BIND``'s look-behind), and generation keeps the
    character before it (it escapes quotes and backslashes only): such text is written as it
    is, without a walk to mark it."""
    return ":" in text and _BIND_COLON.search(text) is not None


def _plain(check: Check) -> bool:
    """Whether the tree surely holds none of what the dialect's select steps rewrite
    (``dialects.generate_text``: DISTINCT ON, QUALIFY, SEMI / ANTI and FULL joins, ``UNNEST``),
    without a walk: every select and call of the query's own text is in ``Check.queries`` and
    ``Check.functions``, and the passes after the scan write only copies of what the tree
    holds, plain selects (the LIMIT wrapper, SQLite's lists, the derived tables of confined reads)
    and no call of that kind (as
    ``portable.py``: ``_may_hold_rewritten``) — but for row filters, parsed from the manifest."""
    if check.names.filters:
        return False
    for node in check.functions:
        if isinstance(node, exp.Unnest):
            return False
    for query in check.queries:
        if not isinstance(query, exp.Select):
            continue
        args = query.args
        distinct = args.get("distinct")
        if args.get("qualify") or (distinct is not None and distinct.args.get("on")):
            return False
        for join in args.get("joins") or ():
            if join.side == "FULL" or join.kind in ("SEMI", "ANTI"):
                return False
    return True


def _reads_names_to_quote(check: Check) -> bool:
    """Whether a name of the manifest that reaches the text may need quotes sqlglot would not
    write (``quoting.py``): those of the tables the query reads (a star's columns, the
    derived tables of confined reads), and the schema, which qualifies every table."""
    names = check.names
    if names.schema_to_quote:
        return True
    to_quote = names.tables_to_quote
    return bool(to_quote) and any(table.name.lower() in to_quote for _, table in check.reads)


def generate(check: Check) -> None:
    """Write ``check.sql`` from the tree in the source's dialect."""
    tree = check.tree
    assert tree is not None
    for placeholder in check.bind_nodes:
        placeholder.replace(exp.Var(this=":" + placeholder.name))
    write_aliases(check)  # as the query wrote them: the text is shown as what ran
    # Text the query did not write reaches the tree too: row filters (with their parameters)
    # and the manifest's schema, which qualifies every table.
    colons = _may_read_as_bind(check.text) or check.params or ":" in (check.manifest.schema_ or "")
    marker = _mark_colons(tree) if colons else None
    make_portable(check, tree)
    # Without a copy: the tree is ours and discarded afterwards; sqlglot's defensive deep copy
    # would otherwise cost as much as the generation itself.
    quote = check.quote_names or _reads_names_to_quote(check)
    sql = generate_text(check.sql_dialect, tree, lean=_plain(check), quote_names=quote)
    if marker is not None:
        sql = sql.replace(marker, "\\:")
    found = set(_TEXT_BIND.findall(sql)) if ":" in sql else set()
    if found != set(check.params):
        raise check.fail(
            "unsupported",
            "the rewritten query would not bind its parameters safely "
            f"(found {sorted(found)}, bound {sorted(check.params)})",
            "avoid ':' outside string literals (use CAST(x AS type) instead of x::type)",
        )
    check.sql = sql
