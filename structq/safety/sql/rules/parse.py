"""The text is one bounded statement: one sqlglot tree, indexed (and normalised) by a single walk.

References (``<members>``, ``<members.employee_id>``) are not SQL, so each is swapped for a
placeholder with a per-call random name before parsing. Which ``<…>`` are references is
decided by the one reference grammar (``capabilities.references``, tokenizer-based): the same
characters inside a string literal or a comment stay untouched. Any other placeholder in the tree was written by the query's author
and is refused later (``placeholder``): only the sandbox binds values. The one exception is a
template plan's slot parameter (``:month_start``), which ``scan`` binds to the value the
template matched (``Check.slots``).

A byte-order mark before the query (editors save one) is dropped; anywhere else an invisible
character stays an error. Before the text is read, its size and encoding are checked, and
before its tokens are parsed, their number and nesting (``safety/bounds.py``): the parser
recurses, and the check's cost grows with the size.
"""

from __future__ import annotations

import re
import secrets

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from structq.capabilities.references import Reference, replace_references

from ...bounds import check_text, check_tokens
from ..context import Check
from ..dialects import parse_text
from ..schema import PLAIN_NAME_LENGTH, PLAIN_NAMES
from ..walk import shared_filters, wanted_by_shared

__all__ = ["parse", "FORBIDDEN"]


def _forbidden_roots() -> tuple[type[exp.Expr], ...]:
    """The node kinds that write, change state, or run a command — wherever they sit.

    sqlglot's own hierarchy (``DML``/``DDL``) plus the statement kinds that are neither;
    ``FORBIDDEN`` holds every class of ``exp`` derived from one of them, and ``scan`` refuses
    any other subclass too (a dialect may define its own). Optimizer
    hints (``/*+ … */``) are among them: MySQL's ``MAX_EXECUTION_TIME`` and ``SET_VAR`` hints
    would override the executor's timeout and session settings for the statement.
    """
    roots: list[type[exp.Expr]] = [exp.DML, exp.DDL]
    for name in (
        "Command Pragma Attach Detach Copy Set SetItem Transaction Commit Rollback Grant Revoke "
        "Use LoadData Into Lock LockingStatement Kill Describe Show Analyze Cache Uncache Refresh "
        "Summarize Declare DeclareItem Execute ExecuteSql Export Install Put Get Alter Drop Create "
        "TruncateTable Merge Returning OnConflict Block StoredProcedure IfBlock WhileBlock "
        "LoopBlock RepeatBlock Return Undrop SwapTable Comment MultitableInserts ConditionalInsert "
        "Directory QueryTransform UserDefinedFunction Credentials Connect Disconnect ConnectTo "
        "Semicolon EndStatement Heredoc Hint"
    ).split():
        cls = getattr(exp, name, None)
        if cls is not None:
            roots.append(cls)
    return tuple(roots)


_FORBIDDEN_ROOTS = _forbidden_roots()
FORBIDDEN = frozenset(
    c for c in vars(exp).values() if isinstance(c, type) and issubclass(c, exp.Expr) and issubclass(c, _FORBIDDEN_ROOTS)
)
_BOM = "\ufeff"
_MODEL_PLACEHOLDERS = (exp.Placeholder, exp.Parameter, exp.SessionParameter)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.In, exp.NullSafeEQ, exp.NullSafeNEQ)
#: Control, format (zero-width, bidi), separator and private-use characters.
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ue000-\uf8ff\ufff9-\ufffb]")


def _swap_references(check: Check) -> str:
    """The text with each reference replaced by a fresh placeholder; records the mapping.

    The nonce is drawn for the first reference only: most queries have none, and drawing it
    (``os.urandom``) costs a system call.
    """
    nonce: list[str] = []

    def placeholder(reference: Reference) -> str:
        if not nonce:
            nonce.append(secrets.token_hex(6))
        name = "sq" + nonce[0] + "_" + str(len(check.placeholders))
        check.placeholders[name] = reference.text
        return " :" + name + " "

    return replace_references(check.text, check.sql_dialect, placeholder)


def _parse_error(check: Check, exc: ParseError | TokenError) -> Exception:
    if isinstance(exc, ParseError) and exc.errors:
        first = exc.errors[0]
        where = f"line {first.get('line')}, column {first.get('col')}"
        snippet = "".join(str(first.get(k) or "") for k in ("start_context", "highlight", "end_context"))
        message = f"could not parse the query ({first.get('description')}) at {where}: …{snippet.strip()}…"
    else:
        message = f"could not parse the query: {str(exc).splitlines()[0]}"
    return check.fail(
        "parse_error",
        message,
        f"write one plain {check.sql_dialect} SELECT statement; constructs sqlglot cannot "
        "parse (e.g. INTO OUTFILE, LOAD DATA) are refused",
    )


def _is_empty(statement: exp.Expr | None) -> bool:
    """An empty statement: nothing (``;;``) or only a comment after the last ``;``.

    sqlglot returns ``None`` for the first and an argument-less ``Semicolon`` node holding the
    comment for the second (``SELECT 1; -- done``); neither runs anything.
    """
    return statement is None or (type(statement) is exp.Semicolon and not any(statement.args.values()))


def parse(check: Check) -> None:
    """Parse exactly one statement and index its nodes in one walk."""
    if check.text.startswith(_BOM):
        check.text = check.text.lstrip(_BOM)  # an editor's byte-order mark, not part of the query
    check_text(check.text, check.manifest)  # size and encoding, before anything reads it
    text = _swap_references(check)
    check.parsed_text = text
    try:
        # sqlglot reports through ``logging``, never ``warnings``: nothing to silence here
        # (``warnings.catch_warnings`` would also change process-wide state per call).
        parsed, check.tokens = parse_text(check.sql_dialect, text,
                                          lambda tokens: check_tokens(tokens, check.manifest))
        statements = [s for s in parsed if not _is_empty(s)]
    except (ParseError, TokenError) as exc:
        raise _parse_error(check, exc) from None
    if len(statements) != 1:
        raise check.fail(
            "multiple_statements" if statements else "parse_error",
            f"expected exactly one statement, found {len(statements)}",
            "send a single SELECT (or WITH … SELECT) statement without ';'-separated extras",
        )
    check.tree = statements[0]
    scan(check)


# What ``scan`` files each node class under, decided once per class (``_kind``).
(_SKIP, _COLUMN, _TABLE, _SUBQUERY, _IDENTIFIER, _FORBIDDEN, _PLACEHOLDER, _FUNCTION, _WITH, _TYPE, _DOT, _STAR,
 _ALIAS) = range(13)
#: Added to a kind when the node is also a comparison (``_COMPARISONS``), when it is a query
#: (``exp.Query``: selects, set operations, subqueries), and when a shared filter wants it
#: (``walk.py``: ``Check.shared_wanted``).
_COMPARISON = 16
_QUERY = 32
_SHARED = 64
_kinds: dict[type, int] = {}
#: How many shared filters ``_kinds`` was decided with (``walk.shared_filters``).
_kinds_for = 0


def _kind(cls: type) -> int:
    """The kind of a node class; a class may be a comparison on top of its kind."""
    if cls is exp.Column:
        kind = _COLUMN
    elif cls is exp.Table:
        kind = _TABLE
    elif cls is exp.Subquery:
        kind = _SUBQUERY
    elif cls is exp.Identifier:
        kind = _IDENTIFIER
    elif cls in FORBIDDEN or issubclass(cls, _FORBIDDEN_ROOTS):
        # The second test also catches subclasses defined outside ``exp`` (in a dialect).
        kind = _FORBIDDEN
    elif issubclass(cls, _MODEL_PLACEHOLDERS):
        # Only a plain placeholder can be one of ours; which one is decided per node.
        kind = _PLACEHOLDER if cls is exp.Placeholder else _FORBIDDEN
    elif issubclass(cls, exp.Func) or issubclass(cls, exp.Operator):
        # ``OPERATOR(schema.op)`` calls a function by another name: the function check sees it.
        kind = _FUNCTION
    elif issubclass(cls, exp.With):
        kind = _WITH
    elif issubclass(cls, exp.DataType):
        kind = _TYPE
    elif issubclass(cls, exp.Dot):
        kind = _DOT
    elif issubclass(cls, exp.Star):
        kind = _STAR
    elif issubclass(cls, (exp.Alias, exp.TableAlias)):
        kind = _ALIAS
    else:
        kind = _SKIP
    if issubclass(cls, _COMPARISONS):
        kind += _COMPARISON
    if issubclass(cls, exp.Query):
        kind += _QUERY
    if wanted_by_shared(cls):
        kind += _SHARED
    _kinds[cls] = kind
    return kind


def scan(check: Check) -> None:
    """One walk over the tree, filing the nodes later rules look at.

    The same walk normalises every identifier for matching without regard to case
    (``schema.py``: ``names_dialect``, whose ``normalize_identifier`` lower-cases every
    identifier, quoted or not), which sqlglot's ``normalize_identifiers`` would do in a walk
    of its own (the text as written is kept, ``Check.written_case``, for output aliases), and
    lists the nodes a shared filter wants (``Check.shared_seen``), so that the checks reading
    those make no second walk. It notes an identifier that needs quotes
    sqlglot would not write (``Check.quote_names``): a copy of it may be written bare later.
    What it finds for a name that is visible and needs no quotes is the same every time, so
    the manifest's derived state remembers it (``Derived.plain_names``) and a name seen before
    costs one look-up.
    """
    global _kinds_for
    assert check.tree is not None
    names = check.names
    lower = names.lower
    if _kinds_for != shared_filters():  # a shared filter made since: decide every class again
        _kinds.clear()
        _kinds_for = shared_filters()
    kinds = _kinds
    invisible = _INVISIBLE.search
    reserved, plain = names.reserved, names.plain_names
    columns, tables, subqueries = check.columns, check.tables, check.subqueries
    functions, comparisons, forbidden = check.functions, check.comparisons, check.forbidden
    for node in check.tree.bfs():  # ``walk()``'s order, without its extra generator per node
        cls = type(node)
        kind = kinds.get(cls)
        if kind is None:
            kind = _kind(cls)
        if kind == _SKIP:
            continue
        if kind >= _COMPARISON:
            if kind >= _SHARED:
                check.shared_wanted = True
                check.shared_seen.append(node)
                kind -= _SHARED
            if kind >= _QUERY:
                check.queries.append(node)
                kind -= _QUERY
            if kind >= _COMPARISON:
                comparisons.append(node)
                kind -= _COMPARISON
        if kind == _IDENTIFIER:
            name = node.this
            lowered = plain.get(name)  # a name seen before: visible, needing no quotes
            if lowered is None:
                if name.isascii():
                    # Invisible-free exactly when printable (the pattern's ASCII part is the
                    # control characters), and lower-cased alike by either lowering: string
                    # methods, at a fraction of the cost of the search and of a call.
                    if not name.isprintable():
                        _invisible_identifier(check, name)
                    lowered = name.lower()
                else:
                    if invisible(name):
                        _invisible_identifier(check, name)
                    lowered = lower(name)
                if lowered in reserved or not lowered.isidentifier():  # ``quoting.needs_quotes_bare``
                    check.quote_names = True
                elif len(name) <= PLAIN_NAME_LENGTH and len(plain) < PLAIN_NAMES:
                    plain[name] = lowered
            if lowered != name:
                node.set("this", lowered)
                check.written_case[id(node)] = (node, name)
        elif kind == _COLUMN:
            columns.append(node)
        elif kind == _TABLE:
            tables.append(node)
        elif kind == _FUNCTION:
            functions.append(node)
        elif kind == _SUBQUERY:
            subqueries.append(node)
        elif kind == _FORBIDDEN:
            forbidden.append(node)
        elif kind == _PLACEHOLDER:
            if node.name in check.placeholders:
                check.bind_nodes.append(node)
            elif node.name in check.slots:
                _bind_slot(check, node)
            else:
                forbidden.append(node)
        elif kind == _WITH:
            check.with_clauses.append(node)
        elif kind == _TYPE:
            check.types.append(node)
        elif kind == _DOT:
            check.dots.append(node)
        elif kind == _STAR:
            check.stars.append(node)
        elif kind == _ALIAS:
            check.aliases.append(node)


#: Prefix of a bound slot parameter, so that it never shares a name with a reference or a variable.
SLOT_PREFIX = "slot_"


def _bind_slot(check: Check, node: exp.Placeholder) -> None:
    """A template's slot parameter (``:grade``): bound as ``:slot_grade`` with its value."""
    name = SLOT_PREFIX + node.name
    check.bind(name, check.slots[node.name], ("slot", node.name))
    node.set("this", name)
    check.bind_nodes.append(node)  # written as ``:slot_grade`` in every dialect (``generate``)


def _invisible_identifier(check: Check, name: str) -> None:
    """Invisible characters in a name hide what a query does from the person reading it."""
    char = _INVISIBLE.search(name).group(0)  # type: ignore[union-attr]
    raise check.fail(
        "parse_error",
        f"identifier {name!r} contains the invisible character U+{ord(char):04X}",
        "remove invisible and control characters from the query",
    )
