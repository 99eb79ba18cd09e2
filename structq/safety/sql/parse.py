"""Pass 1: text → one sqlglot tree, plus the single walk that indexes (and normalises) it.

References (``<members>``, ``<members.employee_id>``) are not SQL, so each is swapped for a
placeholder with a per-call random name before parsing. Only a ``<…>`` that the tokenizer
sees as ``<`` … ``>`` tokens is a reference: the same characters inside a string literal or a
comment stay untouched. Any other placeholder in the tree was written by the query's author
and is refused later (``placeholder``): only the sandbox binds values.
"""

from __future__ import annotations

import re
import secrets
import warnings

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from structq.capabilities import REFERENCE

from .context import Check
from .schema import derived

__all__ = ["parse", "FORBIDDEN"]


def _forbidden_classes() -> frozenset[type[exp.Expr]]:
    """Every node kind that writes, changes state, or runs a command — wherever it sits.

    Computed from sqlglot's own hierarchy (every ``DML``/``DDL`` subclass) plus the
    statement kinds that are neither; a subclass of any of them is included too. Optimizer
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
    every = [c for c in vars(exp).values() if isinstance(c, type) and issubclass(c, exp.Expr)]
    return frozenset(c for c in every if issubclass(c, tuple(roots)))


FORBIDDEN = _forbidden_classes()
_MODEL_PLACEHOLDERS = (exp.Placeholder, exp.Parameter, exp.SessionParameter)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.In, exp.NullSafeEQ, exp.NullSafeNEQ)
#: Control, format (zero-width, bidi), separator and private-use characters.
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ue000-\uf8ff\ufff9-\ufffb]")


def _swap_references(check: Check) -> str:
    """The text with each reference replaced by a fresh placeholder; records the mapping."""
    text = check.text
    matches = list(REFERENCE.finditer(text))
    if not matches:
        return text
    tokens = check.dialect.tokenize(text)
    opens = {t.start for t in tokens if t.token_type == TokenType.LT}
    closes = {t.end for t in tokens if t.token_type == TokenType.GT}
    nonce = secrets.token_hex(6)
    pieces: list[str] = []
    last = 0
    for i, match in enumerate(matches):
        if match.start() not in opens or match.end() - 1 not in closes:
            continue  # inside a string literal or a comment: not a reference
        name = "sq" + nonce + "_" + str(i)
        check.placeholders[name] = match.group(0)[1:-1]
        pieces += [text[last : match.start()], " :", name, " "]
        last = match.end()
    pieces.append(text[last:])
    return "".join(pieces)


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
        f"write one plain {check.manifest.sql_dialect} SELECT statement; constructs sqlglot cannot "
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
    text = _swap_references(check)
    check.parsed_text = text
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            statements = [s for s in check.dialect.parse(text) if not _is_empty(s)]
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


def scan(check: Check) -> None:
    """One walk over the tree, filing the nodes later passes look at.

    The same walk normalises every identifier for matching without regard to case
    (``schema.py``: ``names_dialect``), which sqlglot's ``normalize_identifiers`` would do
    in a walk of its own.
    """
    assert check.tree is not None
    normalize = derived(check.manifest).names_dialect.normalize_identifier
    for node in check.tree.walk():
        cls = type(node)
        if cls is exp.Column:
            check.columns.append(node)
        elif cls is exp.Table:
            check.tables.append(node)
        elif cls is exp.Subquery:
            check.subqueries.append(node)
        elif cls is exp.Identifier:
            _check_identifier(check, node)
            normalize(node)
        elif cls in FORBIDDEN:
            check.forbidden.append(node)
        elif isinstance(node, _MODEL_PLACEHOLDERS):
            if cls is exp.Placeholder and node.name in check.placeholders:
                check.bind_nodes.append(node)
            else:
                check.forbidden.append(node)
        elif isinstance(node, exp.Func):
            check.functions.append(node)
        if isinstance(node, _COMPARISONS):
            check.comparisons.append(node)


def _check_identifier(check: Check, node: exp.Identifier) -> None:
    """Invisible characters in a name hide what a query does from the person reading it."""
    found = _INVISIBLE.search(node.name)
    if found:
        char = found.group(0)
        raise check.fail(
            "parse_error",
            f"identifier {node.name!r} contains the invisible character U+{ord(char):04X}",
            "remove invisible and control characters from the query",
        )
